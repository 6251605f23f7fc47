#!/usr/bin/env bash
# Refresh the Swagger UI and ReDoc files that /docs and /redoc serve (service/api/static),
# from the npm registry, with their licences. Usage: .ci/update_docs_assets.sh [SWAGGER_UI [REDOC]]
# ReDoc stays on 2.x: FastAPI's get_redoc_html writes the <redoc spec-url> page of ReDoc 2.
set -euo pipefail
swagger_version=${1:-5.35.0}
redoc_version=${2:-2.5.4}
static="$(cd "$(dirname "$0")/.." && pwd)/service/api/static"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack --silent "swagger-ui-dist@$swagger_version" "redoc@$redoc_version" >/dev/null
mkdir swagger redoc
tar -xzf "swagger-ui-dist-$swagger_version.tgz" -C swagger
tar -xzf "redoc-$redoc_version.tgz" -C redoc
rm -rf "$static/swagger-ui" "$static/redoc"
mkdir -p "$static/swagger-ui" "$static/redoc"
for f in swagger-ui-bundle.js swagger-ui-bundle.js.LICENSE.txt swagger-ui.css favicon-32x32.png LICENSE NOTICE; do
  cp "swagger/package/$f" "$static/swagger-ui/"
done
for f in bundles/redoc.standalone.js bundles/redoc.standalone.js.LICENSE.txt LICENSE; do
  cp "redoc/package/$f" "$static/redoc/"
done
printf 'swagger-ui-dist %s (Apache-2.0)\nredoc %s (MIT)\n' "$swagger_version" "$redoc_version" > "$static/VERSIONS"
echo "updated $static: swagger-ui-dist $swagger_version, redoc $redoc_version"
