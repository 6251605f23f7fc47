"""/docs and /redoc load every asset from the service itself: they work with no internet."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient

from tests.conftest import REPO

STATIC = REPO / "service" / "api" / "static"


class _Refs(HTMLParser):
    """Every URL a page makes the browser fetch: src/href attributes and spec-url."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href", "spec-url") and value:
                self.urls.append(value)


def _page_urls(html: str) -> list[str]:
    parser = _Refs()
    parser.feed(html)
    # Swagger UI's page sets the spec's URL in an inline script, not an attribute.
    return parser.urls + re.findall(r"url: '([^']+)'", html)


@pytest.mark.parametrize(
    ("page", "assets"),
    [
        ("/docs", {"swagger-ui-bundle.js": "javascript", "swagger-ui.css": "text/css", ".png": "image/png"}),
        ("/redoc", {"redoc.standalone.js": "javascript", ".png": "image/png"}),
    ],
)
def test_docs_page_uses_only_local_assets(client: TestClient, page: str, assets: dict[str, str]) -> None:
    r = client.get(page)
    assert r.status_code == 200
    urls = _page_urls(r.text)
    remote = [u for u in urls if re.match(r"^(https?:)?//", u)]
    assert not remote, f"{page} loads from the network: {remote}"
    assert "/openapi.json" in urls
    for suffix, content_type in assets.items():
        matching = [u for u in urls if u.endswith(suffix)]
        assert len(matching) == 1, (suffix, urls)
        asset = client.get(matching[0])
        assert asset.status_code == 200, matching[0]
        assert content_type in asset.headers["content-type"], asset.headers["content-type"]
        assert len(asset.content) > 500
    assert client.get("/openapi.json").status_code == 200


def test_swagger_ui_bundle_is_the_real_library(client: TestClient) -> None:
    js = client.get("/static/docs/swagger-ui/swagger-ui-bundle.js")
    assert js.status_code == 200
    assert "SwaggerUIBundle" in js.text and len(js.content) > 1_000_000
    # OpenAPI 3.1 documents (what FastAPI writes) need Swagger UI 5.
    assert re.match(r"swagger-ui-dist 5\.", (STATIC / "VERSIONS").read_text())


def test_docs_assets_ship_with_their_licences() -> None:
    for folder, licence in (("swagger-ui", "Apache License"), ("redoc", "MIT License")):
        assert licence in (STATIC / folder / "LICENSE").read_text()


def test_oauth2_redirect_page_is_served(client: TestClient) -> None:
    r = client.get("/docs/oauth2-redirect")
    assert r.status_code == 200 and "oauth2" in r.text.lower()


def test_unknown_asset_is_404(client: TestClient) -> None:
    assert client.get("/static/docs/swagger-ui/nope.js").status_code == 404
