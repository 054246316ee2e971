//! The web dashboard of `flxp serve`: a static page and a small handwritten script, embedded in
//! the binary, that log in with an API token and read and act through the GraphQL API; the
//! vendored GraphiQL console at `GET /graphql`; and the live event stream ([`live`]).
//!
//! Every asset is compiled in (`include_str!`/`include_bytes!`): nothing is loaded from another
//! host, so the pages work on air-gapped networks. `docs/dashboard.md` explains the choice.

pub mod live;

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The policy of the dashboard's pages: their own scripts, styles and API only.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// GraphiQL sets inline styles and inlines its fonts as `data:` URLs.
const CSP_GRAPHIQL: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
     font-src 'self' data:; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; \
     base-uri 'none'; form-action 'none'";

/// One embedded file.
struct Asset {
    name: &'static str,
    mime: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $mime:literal, $path:literal) => {
        Asset {
            name: $name,
            mime: $mime,
            body: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/", $path)),
        }
    };
}

/// Files under `/assets/`.
const ASSETS: &[Asset] = &[
    asset!(
        "dashboard.js",
        "text/javascript; charset=utf-8",
        "dashboard/dashboard.js"
    ),
    asset!(
        "dashboard.css",
        "text/css; charset=utf-8",
        "dashboard/dashboard.css"
    ),
    asset!("favicon.svg", "image/svg+xml", "dashboard/favicon.svg"),
    asset!(
        "graphiql/start.js",
        "text/javascript; charset=utf-8",
        "graphiql/start.js"
    ),
    asset!(
        "graphiql/graphiql.min.js",
        "text/javascript; charset=utf-8",
        "graphiql/graphiql.min.js"
    ),
    asset!(
        "graphiql/graphiql.min.css",
        "text/css; charset=utf-8",
        "graphiql/graphiql.min.css"
    ),
    asset!(
        "graphiql/react.production.min.js",
        "text/javascript; charset=utf-8",
        "graphiql/react.production.min.js"
    ),
    asset!(
        "graphiql/react-dom.production.min.js",
        "text/javascript; charset=utf-8",
        "graphiql/react-dom.production.min.js"
    ),
];

/// The dashboard page.
const INDEX: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/assets/dashboard/index.html"
));

/// The GraphiQL page.
const GRAPHIQL: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/assets/graphiql/index.html"
));

fn page(html: &'static str, csp: &'static str) -> Response {
    let mut r = (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        html,
    )
        .into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(csp),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

/// `GET /`: the dashboard.
pub async fn index() -> Response {
    page(INDEX, CSP)
}

/// `GET /graphql`: GraphiQL.
pub async fn graphiql() -> Response {
    page(GRAPHIQL, CSP_GRAPHIQL)
}

/// `GET /assets/{*path}`: an embedded file, or 404.
pub async fn asset(Path(path): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == path) {
        Some(a) => (
            [
                (header::CONTENT_TYPE, a.mime),
                // The files change with the binary only; a restart after an upgrade must not
                // mix old and new, so the browser revalidates.
                (header::CACHE_CONTROL, "no-cache"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            a.body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset\n").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_load_nothing_from_another_host() {
        for (name, text) in [("index.html", INDEX), ("graphiql", GRAPHIQL)] {
            for attr in ["src=\"", "href=\""] {
                for part in text.split(attr).skip(1) {
                    assert!(
                        part.starts_with('/') || part.starts_with('#'),
                        "{name}: {attr}{}",
                        part.chars().take(40).collect::<String>()
                    );
                }
            }
        }
        for a in ASSETS {
            let local = |t: &str| ASSETS.iter().any(|b| format!("/assets/{}", b.name) == t);
            for page in [INDEX, GRAPHIQL] {
                for part in page.split("\"/assets/").skip(1) {
                    let end = part.find('"').unwrap_or(part.len());
                    let path = format!("/assets/{}", &part[..end]);
                    assert!(local(&path), "{path} is not embedded");
                }
            }
            assert!(!a.body.is_empty(), "{}", a.name);
        }
    }
}
