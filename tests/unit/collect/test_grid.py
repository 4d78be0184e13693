"""Method families (collect/plan/families.py): a method with a grid expands into concrete
methods with derived names, substituted flags and their parameters; bad grids fail naming the
field and the family's YAML line; the parameters land in method_params at campaign start;
`check` lists the expanded configurations."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml
from typer.testing import CliRunner

from specsweep.collect.__main__ import app
from specsweep.collect.hosts.base import HostUnreachable
from specsweep.collect.plan.file import PlanError, load_plan, parse_plan
from specsweep.collect.plan.model import Plan
from specsweep.collect.run import runner
from tests.unit.collect.test_plan import BASE, edit, line_of

ROOT = Path(__file__).resolve().parents[3]

FAMILY = """\
  - name: tree
    name_template: "tree-b{budget}"
    grid: {budget: [8, 16, 32]}
    args: [--spec, tree, -md, "{model}", --budget, "{budget}"]
    env: {TREE_BUDGET: "b={budget}", KEY: "{api_key}"}
"""
GRID_PLAN = edit("workloads:\n", FAMILY + "workloads:\n")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    return path


def test_a_one_parameter_grid_expands_with_its_template(tmp_path: Path) -> None:
    plan = load_plan(write(tmp_path, GRID_PLAN))
    tree = [m for m in plan.methods if m.family == "tree"]
    assert [m.name for m in tree] == ["tree-b8", "tree-b16", "tree-b32"]
    assert [m.params for m in tree] == [{"budget": 8}, {"budget": 16}, {"budget": 32}]
    assert tree[1].args == ["--spec", "tree", "-md", "{model}", "--budget", "16"]
    assert tree[1].env == {"TREE_BUDGET": "b=16", "KEY": "{api_key}"}  # the engine's stay
    assert all(m.grid == {} and m.name_template is None for m in tree)
    others = [m for m in plan.methods if m.family is None]
    assert [(m.name, m.params) for m in others] == [("autoregressive", {}), ("ngram", {})]
    assert len({c.config_id for c in plan.configs()}) == 5


def test_two_parameters_make_the_cross_product_with_default_names() -> None:
    text = edit(
        "workloads:\n",
        """\
  - name: tree
    grid: {k: [2, 4], budget: [8, 16.5]}
    args: [--k, "{k}", --budget, "{budget}"]
    params: {variant: fast}
workloads:
""",
    )
    tree = [m for m in parse_plan(text).methods if m.family == "tree"]
    assert [m.name for m in tree] == [
        "tree-k2-budget8",
        "tree-k2-budget16.5",
        "tree-k4-budget8",
        "tree-k4-budget16.5",
    ]
    assert tree[1].params == {"variant": "fast", "k": 2, "budget": 16.5}
    assert tree[3].args == ["--k", "4", "--budget", "16.5"]


def test_a_hand_written_method_may_carry_parameters() -> None:
    text = edit(
        '    args: ["--spec-type", "ngram-simple"]\n',
        '    args: ["--spec-type", "ngram-simple", "--n", "{n}"]\n'
        "    params: {n: 4, greedy: true}\n    family: ngram-n\n",
    )
    ngram = parse_plan(text).methods[1]
    assert (ngram.name, ngram.family) == ("ngram", "ngram-n")
    assert ngram.params == {"n": 4, "greedy": True}
    assert ngram.args == ["--spec-type", "ngram-simple", "--n", "4"]


def test_a_grid_written_out_keeps_names_config_ids_and_the_campaign_id() -> None:
    by_hand = edit(
        "workloads:\n",
        "".join(
            f"""\
  - name: tree-b{b}
    args: [--spec, tree, -md, "{{model}}", --budget, "{b}"]
    env: {{TREE_BUDGET: "b={b}", KEY: "{{api_key}}"}}
"""
            for b in (8, 16, 32)
        )
        + "workloads:\n",
    )
    grid, written = parse_plan(GRID_PLAN), parse_plan(by_hand)
    assert [(c.method.name, c.config_id) for c in grid.configs()] == [
        (c.method.name, c.config_id) for c in written.configs()
    ]
    assert grid.campaign_id() == written.campaign_id()


def test_a_plan_without_grids_keeps_its_hash() -> None:
    """The values computed at commit 072caca, before methods had family fields."""
    plan = parse_plan(BASE)
    assert plan.sha256() == "11131a217cd5b143edeebfd5db1d9a5fd26f5fa8955b129d82153cb453d8439e"
    assert [c.config_id for c in plan.configs()] == ["099b6faa1f2a", "c78f5524869d"]


def test_the_ct200_ddtree_grid_keeps_the_hand_written_ids() -> None:
    plan = load_plan(ROOT / "plans" / "ct200-qwen36.yaml")
    ddtree = [m for m in plan.methods if m.family == "ddtree"]
    assert [m.name for m in ddtree] == [f"ddtree-b{b}" for b in (8, 12, 15, 16, 32, 64)]
    assert plan.campaign_id() == "ct200-qwen36-a320edded409"  # as with six blocks by hand
    ids = {
        (c.method.name, c.tp): c.config_id
        for p in plan.all_phases()
        for c in plan.phase_configs(p, [m.name for m in plan.methods])
    }
    assert ids[("ddtree-b8", 1)] == "5ec3b209a6ad" and ids[("ddtree-b64", 8)] == "b9cbabf2fbe4"


def test_the_default_plan_sweeps_a_llamacpp_parameter() -> None:
    plan = load_plan(ROOT / "plans" / "local.yaml")
    drafts = [m for m in plan.methods if m.family == "draft-simple"]
    assert len(drafts) >= 2 and all(m.name.startswith("draft-simple-n") for m in drafts)
    values = [m.args[m.args.index("--spec-draft-n-max") + 1] for m in drafts]
    assert values == [str(m.params["n_max"]) for m in drafts]
    assert set(plan.estimates.speedup) >= {m.name for m in drafts}


BAD = [  # (edit to the family entry, the field the message names, words it says)
    (
        "grid: {budget: [8, 16, 32]}",
        "grid: {budget: [8, 16], k: [1, 2]}",
        "grid.k",
        "appears in no arg or env value",
    ),
    ('"{budget}"]', '"{budget}", --x, "{budgt}"]', "args", "{budgt} names no parameter"),
    ('{TREE_BUDGET: "b={budget}"', '{TREE_BUDGET: "b={size}"', "env", "{size}"),
    ("grid: {budget: [8, 16, 32]}", "grid: {budget: []}", "grid.budget", "empty"),
    (
        "grid: {budget: [8, 16, 32]}",
        'grid: {budget: [8, 16, "8"]}',
        "grid.budget",
        "duplicate values ['8']",
    ),
    ('"tree-b{budget}"', '"tree"', "name_template", "'tree' is derived for both"),
    ('"tree-b{budget}"', '"tree-{size}"', "name_template", "{size} is not a grid parameter"),
    (
        '"tree-b{budget}"',
        '"tree b{budget}"',
        "name_template",
        "derived name 'tree b8' is not a valid method name",
    ),
    ("    grid:", "    params: {budget: 4}\n    grid:", "params", "['budget'] are also in grid"),
    ("    grid:", "    family: other\n    grid:", "family", "is the family 'tree' itself"),
    (
        "{budget: [8, 16, 32]}",
        "{budget: [8, 16, 32], model: [a, b]}",
        "grid",
        "'model' is reserved",
    ),
    (
        "{budget: [8, 16, 32]}",
        '{budget: [8, 16, 32], "2x": [a, b]}',
        "grid",
        "parameter name '2x' must match",
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "field", "words"), BAD, ids=[f"{b[2]}-{i}" for i, b in enumerate(BAD)]
)
def test_a_bad_grid_names_the_field_and_the_family_line(
    tmp_path: Path, old: str, new: str, field: str, words: str
) -> None:
    text = edit(old, new, GRID_PLAN)
    with pytest.raises(PlanError) as err:
        load_plan(write(tmp_path, text))
    message = str(err.value)
    assert f"methods.2 (line {line_of(text, '- name: tree')}):" in message, message
    assert f"{field}:" in message and words in message, message


def test_names_derived_twice_or_like_a_family_fail() -> None:
    clash = edit("  - name: ngram\n", "  - name: tree-b16\n", GRID_PLAN)
    with pytest.raises(
        PlanError,
        match=r"duplicate method names \['tree-b16'\] \(derived by "
        r"families \['tree'\]\)",
    ):
        parse_plan(clash)
    named = edit("  - name: ngram\n", "  - name: tree\n", GRID_PLAN)
    with pytest.raises(PlanError, match=r"family names \['tree'\] are also method names"):
        parse_plan(named)
    plain = edit(
        '    args: ["--spec-type", "ngram-simple"]\n', '    args: ["--spec-type", "{kind}"]\n'
    )
    with pytest.raises(PlanError, match=r"args: \{kind\} names no parameter"):
        parse_plan(plain)
    template = edit(
        '    args: ["--spec-type", "ngram-simple"]\n',
        '    args: ["--spec-type", "ngram-simple"]\n    name_template: "x{n}"\n',
    )
    with pytest.raises(PlanError, match="name_template: only a method with a grid"):
        parse_plan(template)


def test_phases_estimates_and_baseline_may_name_a_family() -> None:
    text = (
        GRID_PLAN
        + """\
phases:
  - {name: first, tp: 1, methods: [tree, ngram]}
estimates:
  speedup: {tree: 2.0, tree-b32: 3.0, ngram: 1.1}
"""
    )
    plan = parse_plan(text)
    assert plan.all_phases()[0].methods == ["tree-b8", "tree-b16", "tree-b32", "ngram"]
    assert plan.estimates.speedup == {
        "tree-b8": 2.0,
        "tree-b16": 2.0,
        "tree-b32": 3.0,
        "ngram": 1.1,
    }
    with pytest.raises(PlanError, match=r"speedup names unknown methods \['trees'\]"):
        parse_plan(edit("{tree: 2.0", "{trees: 2.0", text))
    with pytest.raises(PlanError, match=r"'tree' is a family of 3 methods"):
        parse_plan(GRID_PLAN + "baseline: tree\n")
    single = edit("[8, 16, 32]", "[8]", GRID_PLAN) + "baseline: tree\n"
    assert parse_plan(single).baseline == "tree-b8"


def _unreachable_plan() -> tuple[Plan, str]:
    """A plan whose host cannot be resolved: the campaign starts, records its rows and ends
    as unreachable at once."""
    data = yaml.safe_load(GRID_PLAN)
    data["host"] = {
        "kind": "ssh",
        "address": "no-such-box.invalid",
        "connect_timeout_s": 1,
        "reconnect_attempts": 0,
    }
    data["methods"][1]["params"] = {"greedy": True, "mode": "fast", "n": "0.5"}
    text = yaml.safe_dump(data, sort_keys=False)
    return parse_plan(text), text


def test_method_params_land_with_the_campaign_and_a_resume_keeps_them(tmp_path: Path) -> None:
    plan, text = _unreachable_plan()
    db = tmp_path / "r.duckdb"
    for _ in range(2):  # the second run resumes the same campaign
        with pytest.raises(HostUnreachable):
            runner.run(plan, text, db, tmp_path / "logs", show_progress=False)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT campaign_id, method, family, param, value, value_num "
            "FROM method_params ORDER BY method, param"
        ).fetchall()
        status = con.execute("SELECT status FROM campaigns").fetchall()
    cid = plan.campaign_id()
    assert status == [("unreachable",)]
    assert rows == [
        (cid, "ngram", "ngram", "greedy", "True", None),
        (cid, "ngram", "ngram", "mode", "fast", None),
        (cid, "ngram", "ngram", "n", "0.5", 0.5),
        (cid, "tree-b16", "tree", "budget", "16", 16.0),
        (cid, "tree-b32", "tree", "budget", "32", 32.0),
        (cid, "tree-b8", "tree", "budget", "8", 8.0),
    ]  # autoregressive has no parameters: no rows


def test_check_lists_the_expanded_configurations(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["check", str(write(tmp_path, GRID_PLAN))])
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.output.splitlines()]
    tree = [line for line in lines if line.startswith("tree-b")]
    assert [line.split(" (config")[0] for line in tree] == [
        "tree-b8 [family tree: budget=8]",
        "tree-b16 [family tree: budget=16]",
        "tree-b32 [family tree: budget=32]",
    ]
    assert any(line.startswith("ngram (config ") for line in lines)
