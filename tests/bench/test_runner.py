"""The benchmark runner end to end on small invented fixtures (hashing embedder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.bench.metrics import METRICS_VERSION
from engine.bench.runner import report, run_benchmark
from engine.errors import BadInput
from engine.memory import MemoryEngine
from engine.store import bench as bench_sql
from tests.shared_data import SHARED_DATA, needs_shared

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"


@pytest.fixture
def engine(tmp_path):
    with MemoryEngine(tmp_path / "main.db", llm=False) as eng:
        yield eng


@pytest.mark.parametrize("dataset,path,default,official_key", [
    ("locomo", "bench_locomo_tiny.json", "official", "turn_evidence_recall@5"),
    ("longmemeval", "bench_longmemeval_s_tiny.json", "official", "session_recall_all@5"),
    ("convomem", "convomem_tiny.json", "memlens", "turn_recall_any@5"),
    ("convomem", "convomem_premixed_tiny.json", "memlens", "turn_recall_any@5")])
def test_run_stores_items_metrics_and_traces(engine, dataset, path, default, official_key):
    out = run_benchmark(engine, dataset, DATA / path, k_values=(1, 5), recipe="offline", embedder="hashing")
    assert out["status"] == "done" and out["failures"] == 0 and out["questions"] > 0
    assert out["sha256"] and out["run_id"] == 1
    # the default figures are the benchmark's own where it has them, ours beside them, each labelled
    assert out["scoring"] == default and out["metrics"] == out["scores"][default]["metrics"]
    assert official_key in out["metrics"] and out["definitions"][default][official_key.split("@")[0]]
    ours = out["scores"]["memlens"]["metrics"]
    assert "turn_recall_any@5" in ours and "turn_mrr" in ours
    assert not any(k.startswith("turn_recall@") for k in ours), "hit is never labelled recall"
    assert {"p50", "p95", "p99"} <= set(out["latency_ms"]) and out["context_tokens"]["mean"] is not None
    run = bench_sql.run(engine.store, out["run_id"])
    assert run["sha256"] == out["sha256"] and run["k_values"] == [1, 5] and run["config"]["embedder"] == "hashing"
    assert run["git_commit"] is None or len(run["git_commit"]) == 40
    assert run["metrics"] == out["metrics"] and run["scores"] == out["scores"]
    assert run["config"]["scoring"]["default"] == default and run["config"]["metrics_version"] == METRICS_VERSION
    items = bench_sql.items(engine.store, out["run_id"], ranking=True)
    assert len(items) == out["questions"]
    for it in items:
        assert it["metrics"] == it["scores"][default] and it["ranking"] == list(dict.fromkeys(it["ranking"]))
        with MemoryEngine(it["trace_db"], create=False, llm=False) as container:
            from engine.bench.runner import BENCH_SCOPE
            from engine.scope import Scope

            trace = container.trace(it["trace_id"], scope=Scope.default(*BENCH_SCOPE))
            assert trace["query"] == it["question"] and trace["candidates"]


def test_locomo_gold_dia_ids_are_matched(engine):
    out = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", k_values=(10,), embedder="hashing")
    items = bench_sql.items(engine.store, out["run_id"])
    scored = [it for it in items if it["gold"]["turn"] and it["category"] != "adversarial"]
    assert scored and all("turn_evidence_recall@10" in it["metrics"] for it in scored)
    retrieved_ids = {m for it in scored for r in it["retrieved"] for m in r["message_ids"]}
    assert any(i.startswith("D") and ":" in i for i in retrieved_ids)
    assert out["by_category"], "per-category metrics"


def test_a_folder_of_realtalk_chats_runs_as_one_locomo_benchmark(engine):
    # REALTALK ships one file per chat; each is a container named by its file, and a turn's
    # time is its message's own (the 10k was run the day before a message sent after midnight)
    out = run_benchmark(engine, "locomo", DATA / "realtalk", k_values=(1, 10), embedder="hashing")
    assert out["status"] == "done" and out["failures"] == 0 and out["questions"] == 4
    items = bench_sql.items(engine.store, out["run_id"])
    assert {it["container"] for it in items} == {"Chat_1_Ana_Ben", "Chat_2_Cai_Dev"}
    assert {it["category"] for it in items} == {"temporal", "multi-hop", "open-domain"}
    assert out["scores"]["memlens"]["metrics"]["turn_evidence_recall@10"] == 1.0
    ten_k = next(it for it in items if "10k" in it["question"])
    with MemoryEngine(ten_k["trace_db"], create=False, llm=False) as container:
        from engine.bench.runner import BENCH_SCOPE
        from engine.scope import Scope

        scope = Scope.default(*BENCH_SCOPE)
        first = next(c for c in container.trace(ten_k["trace_id"], scope=scope)["candidates"] if c["rank"] == 1)
        memory = container.show("memory", first["memory_id"], scope=scope)["memory"]
        assert "first 10k" in memory["text"] and memory["source_time"] == "2023-12-30T00:20:05Z"


def test_limit_resume_and_compare(engine):
    first = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", limit=3, embedder="hashing")
    assert first["questions"] == 3
    calls = {"n": 0}

    def stop():
        calls["n"] += 1
        return calls["n"] > 1

    partial = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", embedder="hashing", should_stop=stop)
    assert partial["status"] == "cancelled"
    done_before = partial["questions"]
    resumed = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", embedder="hashing",
                            resume_run=partial["run_id"])
    assert resumed["status"] == "done" and resumed["questions"] > done_before
    rep = report(engine, resumed["run_id"], against=first["run_id"])
    assert "delta" in rep and "delta_by_category" in rep and rep["markdown"].startswith("# Benchmark run")
    # the first run stopped at three questions: the comparison says so
    assert [d["field"] for d in rep["setup_differences"]] == ["limit"]
    assert f"compared with run {first['run_id']}, which differs in: question limit none vs 3" in rep["markdown"]
    assert "extraction `none`" in rep["markdown"]
    same = report(engine, first["run_id"], against=first["run_id"])
    assert same["setup_differences"] == [] and "same setup" in same["markdown"]
    with pytest.raises(BadInput):
        run_benchmark(engine, "locomo", DATA / "bench_longmemeval_s_tiny.json", resume_run=resumed["run_id"])


def test_parallel_workers_give_the_same_metrics(engine, monkeypatch):
    monkeypatch.setenv("MEMLENS_EMBEDDER", "hashing")
    one = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", embedder="hashing")
    two = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", embedder="hashing", workers=2)
    assert one["metrics"] == two["metrics"]


@pytest.mark.parametrize("bad", [dict(k_values=(0,)), dict(workers=0), dict(recipe="nope"), dict(limit=0)])
def test_bad_arguments(engine, bad):
    with pytest.raises(BadInput):
        run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", embedder="hashing", **bad)


def test_wrong_dataset_kind(engine):
    with pytest.raises(BadInput, match="not longmemeval"):
        run_benchmark(engine, "longmemeval", DATA / "bench_locomo_tiny.json", embedder="hashing")


def test_cli_bench_and_report(tmp_path, capsys):
    from app.cli import main

    db = tmp_path / "m.db"
    code = main(["bench", "locomo", "--data", str(DATA / "bench_locomo_tiny.json"), "--db", str(db), "--json",
                 "--k", "1,3", "--embedder", "hashing"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and {"run_id", "dataset", "sha256", "questions", "metrics", "by_category", "latency_ms",
                          "context_tokens"} <= set(out)
    code = main(["bench", "report", str(out["run_id"]), "--db", str(db), "--out", str(tmp_path / "rep")])
    assert code == 0 and (tmp_path / "rep" / f"run-{out['run_id']}.md").read_text().startswith("# Benchmark run")
    code = main(["bench", "locomo", "--db", str(db)])
    assert code == 2


def test_optional_question_answering_through_the_endpoint(tmp_path, openai_server):
    from engine.llm import LLMClient, LLMConfig

    def respond(request):
        name = request["response_format"]["json_schema"]["name"]
        if name == "answer":
            return {"answer": "a cat"}
        user = request["messages"][-1]["content"]
        return {"correct": "cat" in user.split("Gold answer:")[1].split("\n")[0].lower(), "reason": "compared"}

    openai_server.chat_responder = respond
    client = LLMClient(LLMConfig(base_url=openai_server.base_url, model="m", task_models={"JUDGE": "judge-m"},
                                 timeout=5, max_retries=0))
    with MemoryEngine(tmp_path / "main.db", llm=client) as eng:
        out = run_benchmark(eng, "locomo", DATA / "bench_locomo_tiny.json", limit=4, embedder="hashing", qa=True)
        run = bench_sql.run(eng.store, out["run_id"])
        items = bench_sql.items(eng.store, out["run_id"])
    client.close()
    assert 0.0 <= out["metrics"]["qa_accuracy"] <= 1.0
    assert run["models"] == {"answer": "m", "judge": "judge-m"} and set(run["prompt_hashes"]) == {"answer", "judge"}
    assert run["config"]["qa_prompts"]["version"] == "qa-v1"
    assert all(it["answer"] == "a cat" and json.loads(it["judge"])["ok"] for it in items)
    answers = [r for r in openai_server.chat_requests if r.json["response_format"]["json_schema"]["name"] == "answer"]
    assert len(answers) == len(items), "one answer per question, never best-of-N"
    # every answer and judgement is accounted for in its container's llm_calls
    from engine.bench.runner import BENCH_SCOPE
    from engine.scope import Scope

    recorded = []
    for db in {it["trace_db"] for it in items}:
        with MemoryEngine(db, create=False, llm=False) as container:
            recorded += container.store.llm_calls(Scope.default(*BENCH_SCOPE), limit=1000)
    assert sorted((r["task"], r["ok"]) for r in recorded) == [("ANSWER", 1)] * len(items) + [("JUDGE", 1)] * len(items)


def test_answer_without_endpoint_is_bad_input(engine):
    with pytest.raises(BadInput, match="endpoint"):
        run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", embedder="hashing", qa=True)


def test_dask_executor_against_a_local_cluster(engine):
    distributed = pytest.importorskip("distributed")
    one = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", embedder="hashing")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None,
                                  protocol="tcp") as cluster:
        two = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", embedder="hashing",
                            executor=f"dask://{cluster.scheduler_address.removeprefix('tcp://')}")
    assert two["status"] == "done" and two["metrics"] == one["metrics"]
    run = bench_sql.run(engine.store, two["run_id"])
    assert run["config"]["executor"].startswith("dask://")


def test_an_in_process_run_uses_the_engines_own_model_when_it_is_the_same(tmp_path, monkeypatch):
    from engine.bench import runner
    from engine.embed.hashing import HashingEmbedder

    for dims, shared in ((HashingEmbedder().dims, True), (64, False)):
        monkeypatch.setattr(runner, "_EMBEDDERS", {})
        own = HashingEmbedder(dims)
        with MemoryEngine(tmp_path / f"main{dims}.db", embedder=own, llm=False) as eng:
            out = run_benchmark(eng, "locomo", DATA / "bench_locomo_tiny.json", limit=2, embedder="hashing")
        assert out["status"] == "done"
        used = runner._EMBEDDERS["hashing"]
        assert (used is own) is shared  # a different model is never passed off as the one named
        assert used.dims == HashingEmbedder().dims


def test_session_metrics_read_past_the_top_k_memories(engine, tmp_path):
    """k sessions may need more than k turns: LongMemEval's turn-to-session evaluation widens k
    until k distinct sessions are in, and so does the runner (the whole ranking, not the top k)."""
    talk = [{"role": "user", "content": f"The quince jam batch {i} needed more quince and lemon."} for i in range(4)]
    data = [{
        "question_id": "q_widen", "question_type": "multi-session", "answer": "twice",
        "question": "How did the quince jam batches turn out?", "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_dates": ["2023/05/01 (Mon) 10:00", "2023/05/02 (Tue) 10:00", "2023/05/03 (Wed) 10:00"],
        "haystack_session_ids": ["answer_widen_1", "answer_widen_2", "other_1"],
        "haystack_sessions": [
            [dict(t, has_answer=True) for t in talk],
            [{"role": "user", "content": "Another quince jam: it set well this time.", "has_answer": True}],
            [{"role": "user", "content": "My bike needs a new chain."}]],
        "answer_session_ids": ["answer_widen_1", "answer_widen_2"]}]
    path = tmp_path / "widen.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    out = run_benchmark(engine, "longmemeval", path, k_values=(1, 2), embedder="hashing")
    item = bench_sql.items(engine.store, out["run_id"])[0]
    retrieved_sessions = {m.rsplit(":", 1)[0] for r in item["retrieved"] for m in r["message_ids"]}
    assert retrieved_sessions == {"answer_widen_1"}  # the top 2 memories are two turns of one session...
    # ...but the first two distinct sessions of the ranking are both gold ones, for ours and the official code
    for scheme in ("official", "memlens"):
        assert item["scores"][scheme]["session_recall_all@2"] == 1.0
        assert item["scores"][scheme]["turn_recall_all@2"] == 0.0


def test_runs_scored_under_other_metric_definitions_are_flagged(engine):
    from engine.bench.metrics import METRICS_VERSION

    first = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", limit=2, embedder="hashing")
    second = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", limit=2, embedder="hashing")
    assert bench_sql.run(engine.store, first["run_id"])["config"]["metrics_version"] == METRICS_VERSION
    with engine.store.db.write() as conn:  # a run recorded before the version was (the first definitions)
        conn.execute("UPDATE bench_runs SET config = json_remove(config, '$.metrics_version') WHERE id = ?",
                     (first["run_id"],))
    rep = report(engine, second["run_id"], against=first["run_id"])
    flag = {"field": "metrics_version", "label": "metric definitions", "run": METRICS_VERSION, "other": 1}
    assert flag in rep["setup_differences"]
    assert f"metric definitions {METRICS_VERSION} vs 1" in rep["markdown"]
    with pytest.raises(BadInput, match="metric definitions 1"):
        run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", embedder="hashing",
                      resume_run=first["run_id"])




@needs_shared("convomem")
def test_real_convomem_files_run_end_to_end_with_per_category_figures(engine, capsys):
    from app.cli import main

    out = run_benchmark(engine, "convomem", SHARED_DATA / "convomem", k_values=(5,), embedder="hashing", workers=2)
    assert out["status"] == "done" and out["failures"] == 0 and out["questions"] == 199
    assert out["scoring"] == "memlens" and "no retrieval metric" in out["labels"]["memlens"]
    assert sorted(out["by_category"]) == ["abstention", "basic facts", "multi-session", "reasoning", "temporal"]
    assert all(v["turn_recall_any@5"] is not None for v in out["by_category"].values())
    assert out["counts"]["empty_gold"]["turn"] == 2  # the two reasoning items without evidence: counted, not scored
    assert bench_sql.run(engine.store, out["run_id"])["config"]["quirks"]["counts"] == {"no_evidence": 2}
    # the file the issue reported as "not a benchmark file"
    code = main(["bench", "convomem", "--data", str(SHARED_DATA / "convomem" / "category_1_basic_facts__dataset_0.json"),
                 "--db", str(engine.path), "--embedder", "hashing", "--k", "5", "--limit", "3", "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["questions"] == 3


def test_the_container_key_hashes_code_that_exists():
    """A container is rebuilt when the code that makes its rows changes: each path the key hashes
    names a file or package (consolidate.py became a package and its code dropped out of the key)."""
    from engine.bench import containers

    for rel in containers._DEFINITION_PATHS:
        path = containers._ENGINE / rel
        assert path.is_file() or (path.is_dir() and any(path.rglob("*.py"))), rel
    assert "consolidate" in containers._DEFINITION_PATHS and "store" in containers._DEFINITION_PATHS


def test_the_container_key_covers_every_module_ingestion_imports():
    """Walk the imports of the hashed code: an engine module it uses that can change what is
    stored (names.py finds the entity mentions) must be hashed too. Modules that only report,
    locate files or cache (errors, files, paths, memo) and the prompts (versioned in the key by
    extract_v2.VERSION) are not."""
    import ast

    from engine.bench import containers

    hashed = set(containers._DEFINITION_PATHS)
    unhashed_ok = {"errors.py", "files.py", "paths.py", "memo.py", "prompts", "llm.py"}
    files = [f for rel in hashed for f in ((containers._ENGINE / rel).rglob("*.py")
                                           if (containers._ENGINE / rel).is_dir() else [containers._ENGINE / rel])]
    missing = set()
    for f in files:
        pkg = f.relative_to(containers._ENGINE).parts[:-1]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.module is None and not node.level:
                continue
            if node.level:  # relative: resolve against the file's package inside engine/
                base = list(pkg[: len(pkg) - node.level + 1]) if node.level > 1 else list(pkg)
                parts = base + (node.module.split(".") if node.module else [])
            elif node.module.startswith("engine."):
                parts = node.module.split(".")[1:]
            else:
                continue
            while parts and not (containers._ENGINE / f"{'/'.join(parts)}.py").is_file():
                parts = parts[:-1]  # "from ..retrieve.query import fts_query" -> retrieve/query.py
            if not parts:
                continue  # a package's __init__ or outside engine/
            module = f"{'/'.join(parts)}.py"
            if not any(module == h or module.startswith(h.rstrip("/") + "/") for h in hashed | unhashed_ok):
                missing.add(module)
    assert not missing, f"ingestion code imports {sorted(missing)}, which the container key does not hash"


def test_off_adds_to_the_recipes_own_list_and_on_takes_some_back_for_every_caller():
    import argparse

    from app.cli import _switches
    from engine.retrieve.recipes import get_recipe, switched_off

    own = set(get_recipe("offline").off)  # recipes.NOT_SHIPPED
    assert own and "older_mentions" not in own
    assert switched_off("offline") == sorted(own)
    assert switched_off("offline", ["older_mentions"]) == sorted(own | {"older_mentions"})
    assert switched_off("offline", ["older_mentions"], ["claim_match"]) == sorted(own - {"claim_match"} | {"older_mentions"})
    for off, on in ((["nope"], []), ([], ["nope"])):
        with pytest.raises(BadInput, match="unknown feature"):
            switched_off("offline", off, on)
    with pytest.raises(BadInput, match="unknown recipe"):
        switched_off("nope")
    # recall's --off/--on (the CLI) hand recall the same one list the bench runs record
    args = argparse.Namespace(recipe="offline", off="older_mentions", on="claim_match")
    assert _switches(args) == {"off": switched_off("offline", ["older_mentions"], ["claim_match"])}


def test_recipe_settings_reach_every_recall_and_are_recorded(engine):
    from engine.bench.runner import BENCH_SCOPE
    from engine.scope import Scope

    narrow = {"vector_k": 1, "fts_k": 1, "entity_k": 1, "neighbour_window": 0, "baseline_k": 0}
    plain = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", embedder="hashing")
    run = run_benchmark(engine, "locomo", DATA / "bench_locomo_tiny.json", embedder="hashing", settings=narrow)
    assert bench_sql.run(engine.store, run["run_id"])["config"]["set"] == narrow
    assert "set" not in bench_sql.run(engine.store, plain["run_id"])["config"]

    def most_candidates(out):
        most = 0
        for it in bench_sql.items(engine.store, out["run_id"]):
            with MemoryEngine(it["trace_db"], create=False, llm=False) as container:
                most = max(most, len(container.trace(it["trace_id"], scope=Scope.default(*BENCH_SCOPE))["candidates"]))
        return most

    assert most_candidates(run) <= 3 < most_candidates(plain)  # one a channel, with relation hops at most
    rep = report(engine, run["run_id"], against=plain["run_id"])
    assert [d["field"] for d in rep["setup_differences"]] == ["set"]


def test_recipe_settings_refuse_bad_input_in_one_line(tmp_path, capsys):
    from app.cli import main
    from engine.retrieve.recipes import parse_settings

    assert parse_settings(["slot_similarity=0.5", "restatement_pool=12", "planner=false"]) == {
        "slot_similarity": 0.5, "restatement_pool": 12, "planner": False}
    for bad, match in (("nope=1", "not a recipe setting"), ("restatement_pool=1.5", "an integer"),
                       ("slot_similarity=x", "a number"), ("slot_similarity=nan", "finite"),
                       ("planner=maybe", "true or false"), ("slot_similarity", "NAME=VALUE"),
                       ("off=vector", "not a recipe setting"), ("name=x", "not a recipe setting")):
        with pytest.raises(BadInput, match=match):
            parse_settings([bad])
    db = tmp_path / "m.db"
    code = main(["bench", "locomo", "--data", str(DATA / "bench_locomo_tiny.json"), "--db", str(db),
                 "--embedder", "hashing", "--set", "nope=1"])
    err = capsys.readouterr().err
    assert code == 2 and "not a recipe setting" in err and len(err.strip().splitlines()) == 1
    assert not db.exists()  # refused before the database was opened
    code = main(["bench", "ablate", "--data", str(DATA / "bench_locomo_tiny.json"), "--db", str(db),
                 "--set", "vector_k=5"])
    assert code == 2 and "not of bench ablate" in capsys.readouterr().err
