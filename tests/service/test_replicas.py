"""Serving replicas over one data directory: a version activated through one is served by the
other within the refresh interval, the version it replaced leaves memory, and the model cache
stays within its budget."""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi import FastAPI
from fastapi.testclient import TestClient

from modeling.serving.model_cache import ModelCache, estimate_bytes
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from tests.service.utils import DEVICE, fio_files, ingest_fio, quick_train

QUERY = {
    "device": DEVICE,
    "workload": {"write_ratio": 0.3, "queue_depth": 8, "request_size": 16384, "randomness": 1},
}


def _served_version(client: TestClient) -> str:
    r = client.post("/v1/predict", json=QUERY)
    assert r.status_code == 200, r.text
    return str(r.json()["model_version"])


def test_a_version_activated_through_one_replica_is_served_by_the_other(
    trained: DataDir, make_app: Callable[..., FastAPI]
):
    old = trained.catalog.active_model_version(DEVICE).version
    new = quick_train(trained, DEVICE)  # a second version, active; roll back so the replicas start on old
    trained.catalog.activate_model(DEVICE, old)
    app_a, app_b = make_app(model_refresh_ms=200), make_app(model_refresh_ms=200)
    with TestClient(app_a) as a, TestClient(app_b) as b:
        assert _served_version(a) == old and _served_version(b) == old
        r = a.post(f"/v1/devices/{DEVICE}/models/{new.version}/activate")
        assert r.status_code == 200, r.text
        assert _served_version(a) == new.version  # the replica that activated it: at once
        start = time.monotonic()
        while _served_version(b) != new.version:
            assert time.monotonic() - start < 3.0, "the other replica never picked up the new version"
            time.sleep(0.05)
        registry_b: ModelRegistry = app_b.state.service.registry
        assert registry_b.cache.keys() == [(DEVICE, new.version)]  # the retired version left memory
        assert a.app.state.service.registry.cache.keys() == [(DEVICE, new.version)]


def test_the_refresh_interval_is_respected(trained: DataDir):
    registry = ModelRegistry(trained, refresh_s=3600)
    old = registry.load(DEVICE).version
    new = quick_train(trained, DEVICE)
    assert registry.load(DEVICE).version == old  # not checked again yet: no catalog read per request
    registry.refresh(force=True)
    assert registry.load(DEVICE).version == new.version


def test_the_cache_is_bounded_by_estimated_memory(trained: DataDir):
    for name in ("copy-1", "copy-2", "copy-3"):
        ingest_fio(trained, name, fio_files())
        quick_train(trained, name)
    assert estimate_bytes(ModelRegistry(trained).load(DEVICE)) > 10_000  # the trees, not a shell
    loader, sizes = ModelRegistry(trained), {}
    for name in (DEVICE, "copy-1", "copy-2", "copy-3"):  # each model's size as the cache counts it
        before = loader.cache.nbytes
        loader.load(name)
        sizes[name] = loader.cache.nbytes - before
    # room for the last two models and half of the smallest: never for a third
    cap = sizes["copy-2"] + sizes["copy-3"] + min(sizes.values()) // 2
    registry = ModelRegistry(trained, cache_bytes=cap)
    for name in (DEVICE, "copy-1", "copy-2", "copy-3"):
        registry.load(name)
    assert [d for d, _ in registry.cache.keys()] == ["copy-2", "copy-3"]
    assert registry.cache.nbytes <= cap
    assert registry.load(DEVICE).device == DEVICE  # evicted models load again on demand
    assert len(registry.cache) == 2


def test_cache_lru_order_and_newest_always_kept():
    cache = ModelCache(max_bytes=100)
    models = {k: object() for k in "abc"}
    cache.put("a", models["a"], 40)  # type: ignore[arg-type]
    cache.put("b", models["b"], 40)  # type: ignore[arg-type]
    assert cache.get("a") is models["a"]  # a is now the most recent
    cache.put("c", models["c"], 40)  # type: ignore[arg-type]
    assert cache.keys() == ["a", "c"] and cache.nbytes == 80
    cache.put("big", models["a"], 500)  # type: ignore[arg-type]
    assert cache.keys() == ["big"]
