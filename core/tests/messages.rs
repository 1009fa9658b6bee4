//! Errors that say what to do (issue "One library in four languages", the
//! "Messages" findings): a closed port names the address and where it came
//! from, https against a plain-HTTP agent says so, a redirect says it is not
//! followed. (The TTL-out-of-range text is in `lowlevel.rs`.)

mod common;

use baton::{ClientBuilder, ErrorKind};
use common::Fixture;

/// A port nothing listens on (port 1 is reserved and never bound here).
const CLOSED: &str = "127.0.0.1:1";

#[test]
fn a_closed_port_names_the_address_and_where_it_came_from() {
    let configured = ClientBuilder::new().address(CLOSED).build().unwrap();
    let e = configured.kv().get("k").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection);
    assert!(e.is_transient());
    let text = e.to_string();
    assert!(
        text.contains(
            "no Consul agent answered at http://127.0.0.1:1 (the client's configured address)"
        ),
        "{text}"
    );
    let from_env = ClientBuilder::from_lookup(|name| {
        (name == baton::ENV_HTTP_ADDR).then(|| CLOSED.to_string())
    })
    .build()
    .unwrap();
    let text = from_env.kv().get("k").unwrap_err().to_string();
    assert!(
        text.contains("at http://127.0.0.1:1 (from CONSUL_HTTP_ADDR)"),
        "{text}"
    );
}

#[test]
fn https_against_a_plain_http_agent_says_so() {
    let f = Fixture::start();
    if f.url().starts_with("https://") {
        eprintln!("skipped: the test Consul speaks TLS");
        return;
    }
    let host = f.url().trim_start_matches("http://").to_string();
    let c = ClientBuilder::new()
        .address(format!("https://{host}"))
        .build()
        .unwrap();
    let e = c.kv().get("k").unwrap_err();
    let text = e.message().to_string();
    // Issue 31 item 9: the plain words first, the TLS library's after them.
    assert!(
        text.starts_with(&format!(
            "https://{host} does not answer TLS: if the agent serves plain HTTP, use an http:// address"
        )),
        "{text}"
    );
    assert!(
        text.contains("InvalidContentType"),
        "the detail stays: {text}"
    );
}

/// Issue 31 item 9: an address that cannot be a URL is refused when the
/// client is built, naming it, not at the first call with `http: invalid uri
/// character`.
#[test]
fn an_address_that_is_not_a_url_is_refused_at_construction() {
    for bad in [
        "not a url::",
        "http://exa mple:8500",
        "127.0.0.1:85x0",
        "http://",
    ] {
        let e = match ClientBuilder::new().address(bad).build() {
            Ok(_) => panic!("{bad:?} was accepted"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}: {e}");
        assert!(e.to_string().contains(bad), "{bad:?} is named: {e}");
    }
    for good in [
        "127.0.0.1:8500",
        "[::1]:8500",
        "localhost",
        "https://consul.example:8501/p",
    ] {
        assert!(
            ClientBuilder::new().address(good).build().is_ok(),
            "{good:?}"
        );
    }
    let from_env = ClientBuilder::from_lookup(|name| {
        (name == baton::ENV_HTTP_ADDR).then(|| "not a url::".to_string())
    })
    .build();
    let e = from_env.expect_err("refused");
    assert!(e.to_string().contains("CONSUL_HTTP_ADDR"), "{e}");
}

#[test]
fn a_redirect_says_it_is_not_followed() {
    let f = Fixture::start();
    let c = f.client();
    // Consul's ServeMux redirects a path that is not clean.
    let e = c.kv().get("a//b").unwrap_err();
    assert_eq!(e.status(), Some(301), "{e}");
    assert!(
        e.to_string()
            .contains("a redirect, which baton does not follow"),
        "{e}"
    );
}

/// An address ending in Consul's API root (`.../v1`, a common mistake) is refused at
/// construction, saying why; before, every request went to `/v1/v1/...` and a key that
/// exists read as missing.
#[test]
fn an_address_with_the_api_path_is_refused_at_construction() {
    let fx = Fixture::start();
    // `url()`: the address with its scheme (BATON_TEST_CONSUL may carry one, or not).
    let base = fx.url();
    for bad in [format!("{base}/v1"), format!("{base}/v1/kv/")] {
        let e = ClientBuilder::new().address(&bad).build().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad}");
        let text = e.to_string();
        assert!(text.contains("carries the API path"), "{text}");
        assert!(text.contains(&format!("\"{base}\"")), "{text}");
    }
}

/// A reverse proxy's prefix stays allowed, and every error names the full URL it
/// requested (prefix included), not only the API path.
#[test]
fn errors_name_the_full_url_requested() {
    let fx = Fixture::start();
    let base = fx.url();
    let client = ClientBuilder::new()
        .address(format!("{base}/consul"))
        .build()
        .expect("a proxy prefix is allowed");
    let e = client.kv().put("k", b"v").unwrap_err();
    assert_eq!(e.status(), Some(404), "{e}");
    assert_eq!(e.endpoint(), Some("PUT /v1/kv/k"));
    let url = format!("{base}/consul/v1/kv/k");
    assert_eq!(e.url(), Some(url.as_str()));
    assert!(e.to_string().starts_with(&format!("PUT {url}: ")), "{e}");
    let lock = client.lock("jobs/x").unwrap();
    let e = lock
        .acquire(Some(std::time::Duration::from_secs(5)), None)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("{base}/consul/v1/session/create")),
        "{e}"
    );
}
