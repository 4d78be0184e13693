"""Regenerate sglang_bench_serving_shaped.jsonl (see README.md here): run SGLang's own
bench_serving.py, from a venv where `sglang==0.4.6.post5` is installed --no-deps, against the
SGLang-shaped test server. Run it with that venv's python: `python make_sglang_example.py OUT`.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: tests.support
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402

from tests.support.shaped_servers import Script, SGLangServer, serve  # noqa: E402

SCRIPT = Script(legacy_info_path=True)  # 80 ms to the first chunk, then 30 ms per chunk
ARGS = [
    "--backend", "sglang", "--dataset-name", "random-ids", "--random-input-len", "32",
    "--random-output-len", "28", "--random-range-ratio", "1.0", "--num-prompts", "32",
    "--max-concurrency", "4", "--request-rate", "inf", "--output-details", "--disable-tqdm",
    "--seed", "1",
]  # fmt: skip


def word_tokenizer(folder: Path) -> None:
    """A word-level tokenizer for the shaped server's "t0 t1 ..." text (no download)."""
    vocab = {"<unk>": 0, **{f"t{i}": i + 1 for i in range(2000)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        '{"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>"}'
    )


def main(out: Path) -> None:
    # run the file itself: importing the sglang package would pull in the whole runtime
    package = importlib.util.find_spec("sglang").submodule_search_locations[0]
    bench = Path(package) / "bench_serving.py"
    with tempfile.TemporaryDirectory() as folder, serve(SGLangServer(SCRIPT)) as url:
        word_tokenizer(Path(folder))
        port = url.rsplit(":", 1)[1]
        cmd = [
            sys.executable,
            str(bench),
            "--host",
            "127.0.0.1",
            "--port",
            port,
            "--model",
            folder,
            "--output-file",
            str(out),
            *ARGS,
        ]
        subprocess.run(cmd, check=True, timeout=120)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
