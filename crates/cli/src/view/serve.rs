//! `provrun view BUNDLE` without `--out`: the page on a loopback port (hyper's HTTP/1
//! server on tokio), its URL printed, until Ctrl-C. Only `GET /` answers with the page;
//! everything else is a 404. The page's headers repeat its Content-Security-Policy. A
//! listing also answers `GET /runs/ID` for each of its runs (by the ids it lists, nothing
//! else), with that run's page, rendered when it is asked for.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use provrun_store::Location;

use crate::{EXIT_FAILED, EXIT_OK, fail};

/// The runs a listing links to, by id.
pub(super) type Runs = Arc<HashMap<String, Location>>;

/// One run's page, the bundle opened (a tar or an object unpacked) for it.
pub(super) fn page_of(location: &provrun_store::Location) -> Result<String, String> {
    let opened = provrun_store::open_blocking(location).map_err(|e| e.to_string())?;
    let source = provrun_view::BundleSource::folder(opened.dir()).with_label(location.name());
    provrun_view::render_page(&source).map_err(|e| e.to_string())
}

/// A run's page for `GET /runs/ID`: `None` when the listing has no run of that id.
async fn run_page(runs: &Runs, path: &str) -> Option<Result<String, String>> {
    let id = path.strip_prefix("/runs/")?;
    let location = runs.get(id)?.clone();
    Some(
        tokio::task::spawn_blocking(move || page_of(&location))
            .await
            .unwrap_or_else(|e| Err(e.to_string())),
    )
}

async fn answer(
    page: &Bytes,
    csp: &HeaderValue,
    runs: Option<&Runs>,
    req: &Request<Incoming>,
) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let get = matches!(*req.method(), Method::GET | Method::HEAD);
    let mut found =
        (get && (path == "/" || path == "/index.html")).then(|| (page.clone(), csp.clone()));
    if get
        && found.is_none()
        && let Some(runs) = runs
    {
        match run_page(runs, path).await {
            Some(Ok(run)) => {
                let policy = HeaderValue::from_str(&provrun_view::content_security_policy())
                    .unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'"));
                found = Some((Bytes::from(run), policy));
            }
            Some(Err(e)) => tracing::warn!("view: a run's page cannot be made: {e}"),
            None => {}
        }
    }
    let mut response = if let Some((body, csp)) = found {
        let mut r = Response::new(Full::new(body));
        r.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        r.headers_mut().insert(CONTENT_SECURITY_POLICY, csp);
        r
    } else {
        let mut r = Response::new(Full::new(Bytes::from_static(b"not found\n")));
        *r.status_mut() = StatusCode::NOT_FOUND;
        r.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r
    };
    let headers = response.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    response
}

/// Serve `page` under its policy `csp` (a run's page, two runs side by side, or a listing
/// with its `runs`) until Ctrl-C.
pub(crate) fn serve(page: String, csp: &str, port: u16, runs: Option<Runs>) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(EXIT_FAILED, format!("view: cannot start the server: {e}")),
    };
    runtime.block_on(async move {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                return fail(EXIT_FAILED, format!("view: cannot listen on {addr}: {e}"));
            }
        };
        let bound = listener.local_addr().unwrap_or(addr);
        out!("serving the page at http://{bound}/ (Ctrl-C stops)");
        let page = Bytes::from(page);
        let csp = HeaderValue::from_str(csp)
            .unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'"));
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        loop {
            tokio::select! {
                _ = &mut ctrl_c => {
                    eprintln!("provrun: view: stopped");
                    return EXIT_OK;
                }
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let (page, csp, runs) = (page.clone(), csp.clone(), runs.clone());
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let (page, csp, runs) = (page.clone(), csp.clone(), runs.clone());
                            async move {
                                Ok::<_, Infallible>(answer(&page, &csp, runs.as_ref(), &req).await)
                            }
                        });
                        if let Err(e) = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await
                        {
                            tracing::debug!("view: a connection ended with an error: {e}");
                        }
                    });
                }
            }
        }
    })
}
