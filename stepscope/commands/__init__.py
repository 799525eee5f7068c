"""One module per `stepscope` subcommand."""
