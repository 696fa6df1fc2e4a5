//! Tests of `oauth.rs`.

use super::*;

const STATE: &str = "s7ate-of-this-sign-in";
const AUTHORIZE: &str = "https://as.example/authorize?state=s7ate-of-this-sign-in";

fn me(
    _: std::net::SocketAddr,
    _: std::net::SocketAddr,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Owner> + Send>> {
    Box::pin(async { Owner::Me })
}

fn expected(issuer: &Issuer, owner_of: OwnerOf) -> Expected<'_> {
    Expected {
        state: STATE,
        issuer,
        authorization_url: AUTHORIZE,
        owner_of,
    }
}

#[test]
fn only_this_sign_ins_answer_from_its_issuer_is_taken() {
    let described = Issuer::described("https://as.example", true);
    let e = expected(&described, me);
    let answer = |q: &str| judge(q, &e);
    // Not ours: ignored, whatever else it says.
    assert_eq!(answer("code=c&state=forged"), Verdict::Ignored);
    assert_eq!(answer("code=c"), Verdict::Ignored);
    assert_eq!(
        answer("code=c&state=s7ate-of-this-sign-iN"),
        Verdict::Ignored
    );
    assert_eq!(answer(""), Verdict::Ignored);
    // Ours, from the server asked.
    assert_eq!(
        answer("code=c&state=s7ate-of-this-sign-in&iss=https%3A%2F%2Fas.example"),
        Verdict::Answer(Ok("c".to_owned()))
    );
    // Ours, but from another server, or without the `iss` its metadata promises.
    assert_eq!(
        answer("code=c&state=s7ate-of-this-sign-in&iss=https%3A%2F%2Fevil.example"),
        Verdict::Answer(Err(AnswerError::Issuer(Some(
            "https://evil.example".to_owned()
        ))))
    );
    assert_eq!(
        answer("code=c&state=s7ate-of-this-sign-in&iss=https%3A%2F%2Fas.example%2F"),
        Verdict::Answer(Err(AnswerError::Issuer(Some(
            "https://as.example/".to_owned()
        ))))
    );
    assert_eq!(
        answer("code=c&state=s7ate-of-this-sign-in"),
        Verdict::Answer(Err(AnswerError::Issuer(None)))
    );
    // An error from the right server ends the sign-in; so does a missing code.
    assert_eq!(
        answer("error=access_denied&state=s7ate-of-this-sign-in&iss=https%3A%2F%2Fas.example"),
        Verdict::Answer(Err(AnswerError::Refused("access_denied".to_owned())))
    );
    assert_eq!(
        answer("state=s7ate-of-this-sign-in&iss=https%3A%2F%2Fas.example"),
        Verdict::Answer(Err(AnswerError::NoCode))
    );
}

#[test]
fn iss_is_checked_as_far_as_the_server_is_known() {
    // Metadata without the RFC 9207 flag: `iss` may be left out, but not be wrong.
    let quiet = Issuer::described("https://as.example/tenant", false);
    assert!(quiet.accepts(None));
    assert!(quiet.accepts(Some("https://as.example/tenant")));
    assert!(!quiet.accepts(Some("https://as.example/other")));
    // No metadata: an `iss` must be on the authorization endpoint's origin.
    let unknown = Issuer::undescribed("https://as.example:8443/oauth/authorize");
    assert!(unknown.accepts(None));
    assert!(unknown.accepts(Some("https://as.example:8443/oauth")));
    assert!(!unknown.accepts(Some("https://as.example/oauth")));
    assert!(!unknown.accepts(Some("https://evil.example")));
    assert!(!unknown.accepts(Some("not a url")));
}

#[test]
fn the_browser_is_given_the_start_address_not_the_state() {
    let url = "https://as.example/authorize?client_id=a&redirect_uri=http%3A%2F%2F127.0.0.1%3A5123%2Fcallback&state=secret-state";
    assert_eq!(
        start_address(url).as_deref(),
        Some("http://127.0.0.1:5123/start")
    );
    // Only a loopback callback of ours.
    assert_eq!(
        start_address(
            "https://as.example/authorize?redirect_uri=https%3A%2F%2Fevil.example%2Fcallback"
        ),
        None
    );
    assert_eq!(start_address("https://as.example/authorize"), None);
}

/// Sends `request` to the callback and returns its answer.
async fn ask(port: u16, request: &str) -> String {
    let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = socket.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

fn get(target: &str) -> String {
    format!("GET {target} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
}

#[tokio::test]
async fn stray_answers_do_not_end_the_sign_in() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let issuer = Issuer::undescribed(AUTHORIZE);
    let client = tokio::spawn(async move {
        let forged = ask(port, &get("/callback?code=stolen&state=forged")).await;
        assert!(forged.starts_with("HTTP/1.1 400"), "{forged}");
        assert!(forged.contains("ignored"), "{forged}");
        let elsewhere = ask(port, &get("/favicon.ico")).await;
        assert!(elsewhere.starts_with("HTTP/1.1 404"), "{elsewhere}");
        let start = ask(port, &get("/start")).await;
        assert!(start.starts_with("HTTP/1.1 303"), "{start}");
        assert!(
            start.contains(&format!("location: {AUTHORIZE}\r\n")),
            "{start}"
        );
        let done = ask(port, &get(&format!("/callback?code=real&state={STATE}"))).await;
        assert!(done.contains("Signed in"), "{done}");
    });
    let answered = tokio::time::timeout(
        Duration::from_secs(10),
        wait_for_code(&listener, &expected(&issuer, me)),
    )
    .await
    .expect("the real answer ends the wait")
    .unwrap();
    assert_eq!(answered.code, "real");
    // The browser hears how it ended only after the exchange.
    answered.finish(true).await;
    client.await.unwrap();
}

#[tokio::test]
async fn another_users_connection_is_closed_unread() {
    fn other(
        _: std::net::SocketAddr,
        _: std::net::SocketAddr,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Owner> + Send>> {
        Box::pin(async { Owner::Other(65534) })
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let issuer = Issuer::undescribed(AUTHORIZE);
    let client = tokio::spawn(async move {
        // Even the right answer, and the start page, are not served to another user.
        let start = ask(port, &get("/start")).await;
        let answer = ask(port, &get(&format!("/callback?code=c&state={STATE}"))).await;
        (start, answer)
    });
    let waited = tokio::time::timeout(
        Duration::from_millis(1500),
        wait_for_code(&listener, &expected(&issuer, other)),
    )
    .await;
    assert!(waited.is_err(), "another user's answer was taken");
    let (start, answer) = client.await.unwrap();
    assert_eq!((start.as_str(), answer.as_str()), ("", ""));
}

#[tokio::test]
async fn an_unproven_connection_may_answer_but_not_start() {
    fn unknown(
        _: std::net::SocketAddr,
        _: std::net::SocketAddr,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Owner> + Send>> {
        Box::pin(async { Owner::Unknown })
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let issuer = Issuer::undescribed(AUTHORIZE);
    let client = tokio::spawn(async move {
        let start = ask(port, &get("/start")).await;
        assert!(start.starts_with("HTTP/1.1 403"), "{start}");
        assert!(!start.contains(STATE), "{start}");
        ask(port, &get(&format!("/callback?code=c&state={STATE}"))).await
    });
    let answered = tokio::time::timeout(
        Duration::from_secs(10),
        wait_for_code(&listener, &expected(&issuer, unknown)),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(answered.code, "c");
    answered.finish(false).await;
    let page = client.await.unwrap();
    assert!(page.contains("did not complete"), "{page}");
}

#[test]
fn s256_matches_rfc_7636() {
    // RFC 7636, appendix B.
    assert_eq!(
        super::challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    );
    let a = super::random_token(64);
    assert!(a.len() >= 43 && a.len() <= 128 && a != super::random_token(64));
}
