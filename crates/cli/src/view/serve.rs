//! `provrun view BUNDLE` without `--out`: the page on a loopback port (hyper's HTTP/1
//! server on tokio), its URL printed, until Ctrl-C. Only `GET /` answers with the page;
//! everything else is a 404. The page's headers repeat its Content-Security-Policy.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::{EXIT_FAILED, EXIT_OK, fail};

fn answer(page: &Bytes, csp: &HeaderValue, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let found = matches!(*req.method(), Method::GET | Method::HEAD)
        && (path == "/" || path == "/index.html");
    let mut response = if found {
        let mut r = Response::new(Full::new(page.clone()));
        r.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        r.headers_mut().insert(CONTENT_SECURITY_POLICY, csp.clone());
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

pub(crate) fn serve(page: String, port: u16) -> u8 {
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
        let csp = HeaderValue::from_str(&provrun_view::content_security_policy())
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
                    let page = page.clone();
                    let csp = csp.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let response = answer(&page, &csp, &req);
                            async move { Ok::<_, Infallible>(response) }
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
