"""Choosing a model runner: tape, presets, local checkpoints, devices, dtypes, bad input."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from model_checks import toml_workload  # noqa: E402
from stepscope.engine import EngineLoop, InputError, TapeModelRunner, Workload  # noqa: E402
from stepscope.engine.model.config import ModelConfig  # noqa: E402
from stepscope.engine.model.dense_attention import reference_logits  # noqa: E402
from stepscope.engine.model.hf_config import read_model_config  # noqa: E402
from stepscope.engine.model.rotary import inverse_frequencies  # noqa: E402
from stepscope.engine.model.weights import seeded_model  # noqa: E402
from stepscope.engine.model_runner_choice import create_model_runner  # noqa: E402
from stepscope.engine.torch_runner import TorchModelRunner  # noqa: E402

HF_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 300,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 96,
    "rms_norm_eps": 1e-6,
    "rope_theta": 500000.0,
    "max_position_embeddings": 256,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def _workload(vocab_size: int = 300, max_model_len: int = 64) -> Workload:
    return toml_workload(
        f"""
        num_requests = 6
        vocab_size = {vocab_size}
        [config]
        block_size = 4
        num_blocks = 30
        max_num_batched_tokens = 32
        max_num_seqs = 4
        max_model_len = {max_model_len}
        [arrivals]
        process = "constant"
        interval = 1
        [prompt_len]
        distribution = "uniform"
        min = 4
        max = 30
        [output_len]
        distribution = "fixed"
        value = 6
        """.replace("        ", "")
    )


def _outputs(workload: Workload, runner: Any) -> dict[str, tuple[int, ...]]:
    loop = EngineLoop(workload, runner)
    list(loop.run())
    return {req_id: finish.output_token_ids for req_id, finish in loop.final().items()}


def test_tape_plays_the_scripted_outputs() -> None:
    workload = _workload()
    runner = create_model_runner("tape", workload)
    assert isinstance(runner, TapeModelRunner)
    assert _outputs(workload, runner) == {
        s.request_id: s.output_token_ids for s in workload.requests
    }


def test_a_preset_runs_a_seeded_decoder_that_ignores_the_tape() -> None:
    workload = _workload()
    runner = create_model_runner("tiny", workload, device="cpu")
    assert isinstance(runner, TorchModelRunner)
    outputs = _outputs(workload, runner)
    assert outputs != {s.request_id: s.output_token_ids for s in workload.requests}
    assert outputs == _outputs(workload, create_model_runner("tiny", workload, device="cpu"))


def test_bfloat16_runs_on_the_cpu() -> None:
    workload = _workload()
    runner = create_model_runner("tiny", workload, device="cpu", dtype="bfloat16")
    assert isinstance(runner, TorchModelRunner)
    assert runner.kv_cache.kv_caches[0].dtype == torch.bfloat16
    assert all(len(tokens) == 6 for tokens in _outputs(workload, runner).values())


@pytest.mark.parametrize(
    ("model", "options", "message"),
    [
        ("gpt-9", {}, "--model 'gpt-9': expected tape, a preset (tiny, small, medium)"),
        ("tiny", {"device": "tpu"}, "--device 'tpu': expected one of auto, cpu, cuda"),
        ("tiny", {"dtype": "float16"}, "--dtype 'float16': expected one of float32, bfloat16"),
        ("tape", {"dtype": "int8"}, "--dtype 'int8'"),
    ],
)
def test_bad_choices_are_input_errors(model: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(InputError) as caught:
        create_model_runner(model, _workload(), **options)
    assert message in str(caught.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="there is a CUDA device here")
def test_cuda_without_a_device_is_an_input_error() -> None:
    with pytest.raises(InputError, match="--device cuda: PyTorch sees no CUDA device"):
        create_model_runner("tiny", _workload(), device="cuda")


def test_a_token_outside_the_vocabulary_names_the_request() -> None:
    workload = _workload(vocab_size=40000)
    with pytest.raises(InputError) as caught:
        create_model_runner("tiny", workload)
    assert str(caught.value).startswith("<test>: request 'r")
    assert "is not below the model's vocab_size 32000" in str(caught.value)


def test_without_torch_a_real_model_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(InputError, match=r"needs PyTorch.*pip install torch"):
        create_model_runner("tiny", _workload())
    assert isinstance(create_model_runner("tape", _workload()), TapeModelRunner)


def _write_safetensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """The safetensors format by hand: header size, JSON header, raw little-endian bytes."""
    header: dict[str, Any] = {}
    chunks: list[bytes] = []
    offset = 0
    for name, tensor in tensors.items():
        raw = bytes(tensor.contiguous().view(torch.uint8).flatten().tolist())
        header[name] = {
            "dtype": "BF16",
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        chunks.append(raw)
        offset += len(raw)
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(chunks))


def _checkpoint(directory: Path, config: dict[str, Any], shards: int = 1) -> ModelConfig:
    pytest.importorskip("safetensors")
    (directory / "config.json").write_text(json.dumps(config))
    model_config = read_model_config(directory)
    state = seeded_model(model_config, 3, torch.device("cpu"), torch.bfloat16).state_dict()
    names = sorted(state)
    for shard in range(shards):
        part = {name: state[name] for name in names[shard::shards]}
        _write_safetensors(directory / f"model-{shard}-of-{shards}.safetensors", part)
    return model_config


@pytest.mark.parametrize("tied", [False, True])
def test_a_checkpoint_directory_loads_into_the_same_decoder(tmp_path: Path, *, tied: bool) -> None:
    config = _checkpoint(tmp_path, {**HF_CONFIG, "tie_word_embeddings": tied}, shards=2)
    workload = _workload()
    runner = create_model_runner(str(tmp_path), workload, device="cpu")
    assert isinstance(runner, TorchModelRunner)
    assert runner.model.config == config and (runner.model.lm_head is None) == tied
    expected = seeded_model(config, 3, torch.device("cpu"), torch.bfloat16).float()
    assert runner.model.model.embed_tokens.weight.dtype == torch.float32
    tokens = list(workload.requests[0].prompt_token_ids)
    assert torch.equal(reference_logits(runner.model, tokens), reference_logits(expected, tokens))
    assert all(len(t) == 6 for t in _outputs(workload, runner).values())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model_type": "qwen2"}, "model_type: 'qwen2' is not a Llama architecture"),
        ({"hidden_act": "gelu"}, "hidden_act: only 'silu' is supported"),
        ({"num_hidden_layers": "2"}, "num_hidden_layers: expected an integer"),
        (
            {"rope_scaling": {"rope_type": "yarn"}},
            "rope_scaling: rope_type 'yarn' is not supported",
        ),
        (
            {"num_key_value_heads": 3},
            "num_attention_heads 4 is not a multiple of num_key_value_heads 3",
        ),
    ],
)
def test_a_bad_config_json_names_the_file_and_key(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**HF_CONFIG, **change}))
    with pytest.raises(InputError) as caught:
        create_model_runner(str(tmp_path), _workload())
    assert str(caught.value).startswith(f"{tmp_path / 'config.json'}: ")
    assert message in str(caught.value)


def test_checkpoint_problems_are_input_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _checkpoint(tmp_path, HF_CONFIG)
    with pytest.raises(
        InputError, match="max_model_len 512 exceeds the model's max_position_embeddings 256"
    ):
        create_model_runner(str(tmp_path), _workload(max_model_len=512))
    monkeypatch.setitem(sys.modules, "safetensors", None)
    with pytest.raises(InputError, match="needs the 'safetensors' package"):
        create_model_runner(str(tmp_path), _workload())
    monkeypatch.undo()
    (tmp_path / "config.json").write_text(json.dumps({**HF_CONFIG, "intermediate_size": 128}))
    with pytest.raises(
        InputError, match=r"mlp\.down_proj\.weight: shape \(64, 96\) does not match"
    ):
        create_model_runner(str(tmp_path), _workload())
    (tmp_path / "config.json").write_text(json.dumps({**HF_CONFIG, "num_hidden_layers": 3}))
    with pytest.raises(InputError, match=r"no weights for model\.layers\.2\."):
        create_model_runner(str(tmp_path), _workload())
    for file in tmp_path.glob("*.safetensors"):
        file.unlink()
    with pytest.raises(InputError, match=r"no \*\.safetensors files"):
        create_model_runner(str(tmp_path), _workload())


def test_llama3_rope_scaling_stretches_only_long_wavelengths(tmp_path: Path) -> None:
    scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    }
    (tmp_path / "config.json").write_text(json.dumps({**HF_CONFIG, "rope_scaling": scaling}))
    scaled = inverse_frequencies(read_model_config(tmp_path), torch.device("cpu"))
    (tmp_path / "config.json").write_text(json.dumps(HF_CONFIG))
    plain = inverse_frequencies(read_model_config(tmp_path), torch.device("cpu"))
    assert scaled[0] == plain[0]  # a wavelength under 64 / high_freq_factor: kept
    assert plain[1] / 8 < scaled[1] < plain[1]  # between the two: blended
    assert torch.allclose(scaled[2:], plain[2:] / 8)  # longer than 64 / low_freq_factor: stretched
