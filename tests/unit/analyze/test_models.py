"""analyze.models: every model's declared reads are what its SQL reads, the build order follows
them, a bad declaration fails naming the model, and the generated docs are current."""

from __future__ import annotations

import ast
import inspect

import pytest

from specsweep.analyze.models import docs, registry
from specsweep.analyze.models.model import TABLE, TEMP_MACRO, Model, ModelError, ordered
from specsweep.analyze.models.sql import header, raw_layer, read_sql, references, sources

MODELS = registry.models()
BUILT = {name: kind for m in MODELS for name, kind in m.builds.items()}
RELATIONS = raw_layer() | {name for name, kind in BUILT.items() if kind != TEMP_MACRO}
MACROS = {name for name, kind in BUILT.items() if kind == TEMP_MACRO}


def _sql_models() -> list[Model]:
    return [m for m in MODELS if m.source.startswith("analyze/sql/")]


@pytest.mark.parametrize("model", _sql_models(), ids=lambda m: m.name)
def test_a_sql_models_reads_are_what_its_sql_reads(model: Model) -> None:
    text = read_sql(model.source.removeprefix("analyze/sql/"))
    found = references(text, RELATIONS, MACROS) - set(model.builds)
    assert sorted(model.reads) == sorted(found), (
        f"{model.source}: declared `-- reads: {', '.join(model.reads)}`, "
        f"its SQL reads {', '.join(sorted(found))}"
    )


def _strings(source: object) -> list[str]:
    """The string constants of a module or function, f-strings with '_' for each hole."""
    tree = ast.parse(inspect.getsource(source))  # type: ignore[arg-type]
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            texts.append(
                "".join(v.value if isinstance(v, ast.Constant) else "_" for v in node.values)
            )
    return texts


@pytest.mark.parametrize("entry", registry.PYTHON, ids=lambda p: p.run.__name__)
def test_a_python_model_reads_what_its_sql_reads(entry: registry.Python) -> None:
    """The SQL strings of its function and of the modules that document its objects name
    nothing it does not declare (or build)."""
    sources = {entry.run, *(s for s in entry.builds.values() if inspect.ismodule(s))}
    found = {n for s in sources for t in _strings(s) for n in references(t, RELATIONS, MACROS)}
    assert found - set(entry.reads) - set(entry.builds) == set()


def test_every_model_runs_after_what_it_reads() -> None:
    position = {name: i for i, m in enumerate(MODELS) for name in m.builds}
    for i, model in enumerate(MODELS):
        late = [r for r in model.reads if position.get(r, -1) >= i]
        assert not late, f"{model.name} runs before {late}"


def test_the_table_list_is_the_models() -> None:
    from specsweep.analyze import build

    # `specsweep analyze` prints the objects in this order, request_metrics first
    assert registry.objects() == build.OBJECTS and build.OBJECTS[0] == "request_metrics"
    assert {"speedup", "start_variance", "category_pooled", "metric_catalog"} <= set(build.OBJECTS)
    assert not {"analysis_params", "measured_requests", "rate_tpot", "category_cells"} & set(
        build.OBJECTS
    )
    assert build.MEASURED == "measured_requests.sql"


def test_the_header_declares_reads_on_its_first_lines() -> None:
    text = "-- reads: a, b\n-- reads: c\n-- x: what x holds\n--   y = 1\nCREATE TABLE x AS SELECT 1"
    assert header("x.sql", text) == (("a", "b", "c"), "x: what x holds\n  y = 1")
    assert header("w.sql", "-- reads:\n-- w: macros\nCREATE MACRO w() AS 1")[0] == ()
    with pytest.raises(ModelError, match=r"analyze/sql/x.sql: its first line must be"):
        header("x.sql", "-- x: what x holds\n-- reads: a\nCREATE TABLE x AS SELECT 1")


def test_references_skip_comments_strings_ctes_and_functions() -> None:
    sql = """
    -- FROM speedup (a comment)
    WITH speedup AS (SELECT * FROM config_summary)
    SELECT 'FROM requests', extract(epoch FROM services.started_at), wilson_lo(1, 2)
    FROM speedup, request_metrics AS r, unnest(r.list) AS u(v)
    JOIN kept_request_rows() AS k USING (request_id)
    LEFT JOIN (SELECT * FROM units) AS x ON true
    """
    known = {"speedup", "config_summary", "requests", "services", "request_metrics", "units",
             "kept_request_rows"}  # fmt: skip
    assert references(sql, known, {"wilson_lo", "wilson_hi"}) == {
        "config_summary", "request_metrics", "kept_request_rows", "units", "wilson_lo"
    }  # fmt: skip
    assert ("kept_request_rows", True) in sources(sql)


def _model(name: str, reads: tuple[str, ...], *builds: str) -> Model:
    built = builds or (name,)
    return Model(name, reads, dict.fromkeys(built, TABLE), lambda b: None, f"{name}.sql",
                 dict.fromkeys(built, ""))  # fmt: skip


def test_order_is_derived_and_keeps_the_given_order_otherwise() -> None:
    given = [_model("c", ("b",)), _model("a", ()), _model("b", ("a", "requests"))]
    assert [m.name for m in ordered(given, {"requests"})] == ["a", "b", "c"]
    given = [_model("x", ()), _model("c", ("a",)), _model("a", ())]
    assert [m.name for m in ordered(given, set())] == ["x", "a", "c"]


def test_an_unknown_input_names_the_model() -> None:
    with pytest.raises(ModelError, match=r"model b \(b.sql\) reads nowhere: no model builds it"):
        ordered([_model("a", ()), _model("b", ("a", "nowhere"))], set())


def test_a_cycle_names_its_models() -> None:
    with pytest.raises(ModelError, match=r"cycle: (a -> b -> a|b -> a -> b)"):
        ordered([_model("a", ("b",)), _model("b", ("a",)), _model("c", ("a",))], set())


def test_an_object_built_twice_or_a_name_used_twice_is_refused() -> None:
    with pytest.raises(ModelError, match="t is built by both a and b"):
        ordered([_model("a", (), "t"), _model("b", (), "t")], set())
    with pytest.raises(ModelError, match="two models are named a"):
        ordered([_model("a", (), "t"), _model("a", (), "u")], set())


def test_the_generated_docs_are_current() -> None:
    assert docs.stale() == [], "run `python -m specsweep.analyze.models.docs` and commit the result"


def test_every_persistent_object_is_in_the_docs() -> None:
    views = docs.VIEWS.read_text(encoding="utf-8")
    dictionary = docs.DICTIONARY.read_text(encoding="utf-8")
    for name in (*registry.objects(), registry.PARAMS):
        assert f"- columns of `{name}`:" in views, name
        assert f"| `{name}` |" in dictionary, name


def test_a_summary_is_the_first_sentence_without_its_name() -> None:
    doc = "t: one row per x (a. b). More.\ngrain: x"
    assert docs.summary(doc) == "one row per x (a. b)."
    assert docs.summary("t: did it pay? Then more.") == "did it pay?"
    assert docs.summary("The ratio: a | b") == "The ratio: a \\| b"
