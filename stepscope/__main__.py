from stepscope.entry import main

main()
