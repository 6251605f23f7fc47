"""GET /v1/devices/{device}/report: the HTML report through the real app."""

from __future__ import annotations

import pytest

from fastapi.testclient import TestClient

from modeling.store import DataDir
from tests.service.utils import DEVICE, assert_error, fio_files, ingest_fio, quick_train


@pytest.mark.slow
def test_report_is_html_with_embedded_plots(api: TestClient, trained: DataDir) -> None:
    ingest_fio(trained, "other", fio_files(40))
    quick_train(trained, "other")
    response = api.get(f"/v1/devices/{DEVICE}/report", params={"compare": ["other"]})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    assert html.startswith("<!doctype html>") and f"ssdpredict report: {DEVICE} vs other" in html
    assert html.count('src="data:image/png;base64,') == 8  # with the capacity section's
    assert '<section id="capacity">' in html
    assert "RND4K Q32T16" in html and "://" not in html


def test_report_errors_use_the_one_error_shape(api: TestClient, trained: DataDir) -> None:
    assert_error(api.get("/v1/devices/nope/report"), 404, "unknown_device")
    assert_error(api.get(f"/v1/devices/{DEVICE}/report", params={"compare": [DEVICE]}), 422)
    assert_error(api.get(f"/v1/devices/{DEVICE}/report", params={"compare": ["../x"]}), 422)
    too_many = {"compare": ["a", "b", "c", "d", "e"]}
    assert_error(api.get(f"/v1/devices/{DEVICE}/report", params=too_many), 422)
    trained.catalog.ensure_device("empty")
    assert_error(api.get("/v1/devices/empty/report"), 422)
