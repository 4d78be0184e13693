"""The draft model's size in the service fingerprint, measured over a real SSH host
(OpenSSH sshd on 127.0.0.1, see conftest.py): `du -sbL` through `host.run`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specsweep.collect.engines.sglang import SGLang, SGLangEngine
from specsweep.collect.hosts.ssh import SSH
from specsweep.collect.plan.components import SSHHost
from specsweep.collect.plan.fields import Method
from specsweep.collect.run.fingerprint import draft_facts


def test_draft_size_over_ssh(ssh_cfg: dict[str, Any], tmp_path: Path) -> None:
    draft, blobs = tmp_path / "draft", tmp_path / "blobs"
    draft.mkdir()
    blobs.mkdir()
    (blobs / "b1").write_bytes(b"w" * 7000)
    (draft / "model.safetensors").symlink_to(blobs / "b1")  # as a hub cache's snapshot links
    engine = SGLang(SGLangEngine.model_validate({"kind": "sglang", "model": str(tmp_path)}))
    method = Method(name="e", args=["--speculative-draft-model-path", "{model}/draft"])
    with SSH(SSHHost(**ssh_cfg)) as host:
        facts = draft_facts(engine, method, host)
        missing = draft_facts(
            engine,
            Method(name="h", args=["--speculative-draft-model-path", "org/not-a-path"]),
            host,
        )
    assert facts["draft_model"] == str(draft)
    assert int(facts["draft_model_bytes"]) >= 7000  # the link followed to its blob
    assert missing == {"draft_model": "org/not-a-path"}
