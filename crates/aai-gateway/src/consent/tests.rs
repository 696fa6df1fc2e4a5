//! The consent gate's tests (`consent/mod.rs`).

use super::*;
use crate::consent::state::State;
use crate::identity::Person;

#[test]
fn no_client_name_or_subject_makes_one_persons_key_anothers() {
    let person = |name: &str, subject: &str| Caller {
        name: name.into(),
        transport: "http",
        token: None,
        person: Some(Arc::new(Person {
            subject: subject.into(),
            scopes: Vec::new(),
            admin: false,
            bearer: Default::default(),
        })),
    };
    assert_eq!(person("claude", "alice").key(), "claude@http~alice");
    // A subject or name carrying the separators is encoded.
    let sneaky = person("c", "m@http~alice").key();
    assert_eq!(sneaky, "c@http~m%40http%7Ealice");
    assert!(!Caller::key_is_persons(&sneaky, "alice"));
    assert!(Caller::key_is_persons(&sneaky, "m@http~alice"));
    let sneaky = person("c@http~x", "bob").key();
    assert!(!Caller::key_is_persons(&sneaky, "x@http~bob"));
    assert!(Caller::key_is_persons(&sneaky, "bob"));
    assert_ne!(
        person("c@http~x", "bob").key(),
        person("c", "x@http~bob").key()
    );
    assert!(!Caller::key_is_persons("claude@stdio", "alice"));
    assert!(!Caller::key_is_persons("@http~alice", "alice"));
}

fn question(caller: &str) -> Question {
    let caller = Caller {
        name: caller.into(),
        transport: "stdio",
        token: None,
        person: None,
    };
    Question::for_call(&caller, "com.a", "A", "send", "Send")
}

#[tokio::test]
async fn choices_are_remembered_per_caller_and_denials_never() {
    let dir = tempfile::tempdir().unwrap();
    let state = || State::open(&State::file_in(dir.path())).unwrap();
    let shared = || Some(Arc::new(state()));
    let gate = Gate::new(
        ConsentMode::Prompt,
        Default::default(),
        Duration::ZERO,
        shared(),
    );
    let q = question("alpha");
    let e = gate.check(&q, None).await.unwrap_err();
    assert_eq!(e.code, Code::ConsentRequired);
    assert!(
        e.data()["command"]
            .as_str()
            .unwrap()
            .ends_with("--caller alpha@stdio")
    );
    assert!(
        gate.check(&q, Some(&Fixed(Reply::Chosen(Choice::Deny))))
            .await
            .is_err()
    );
    assert!(gate.check(&q, Some(&Fixed(Reply::Declined))).await.is_err());
    gate.check(&q, Some(&Fixed(Reply::Chosen(Choice::Once))))
        .await
        .unwrap();
    assert!(
        gate.check(&q, None).await.is_err(),
        "once is not remembered"
    );
    gate.check(&q, Some(&Fixed(Reply::Chosen(Choice::Tool))))
        .await
        .unwrap();
    gate.check(&q, None).await.unwrap();
    // Another caller has its own decisions.
    assert!(gate.check(&question("beta"), None).await.is_err());
    // Remembered across runs, and a grant made elsewhere is seen.
    let again = Gate::new(
        ConsentMode::Prompt,
        Default::default(),
        Duration::ZERO,
        shared(),
    );
    again.check(&q, None).await.unwrap();
    state()
        .grant(&Grant {
            caller: "beta@stdio".into(),
            app: "com.a".into(),
            tool: "*".into(),
            granted_at: 1,
            cert: None,
            definition: None,
        })
        .unwrap();
    again.check(&question("beta"), None).await.unwrap();
    // Modes.
    let allow = Gate::new(ConsentMode::Allow, Default::default(), Duration::ZERO, None);
    allow.check(&question("x"), None).await.unwrap();
    let per_app = [("com.a".to_owned(), ConsentMode::Deny)]
        .into_iter()
        .collect();
    let deny = Gate::new(ConsentMode::Allow, per_app, Duration::ZERO, None);
    assert_eq!(
        deny.check(&question("x"), None).await.unwrap_err().code,
        Code::PermissionDenied
    );
}

#[tokio::test]
async fn a_change_approved_in_the_ui_releases_that_change_only_and_is_never_kept() {
    let gate = Gate::new(
        ConsentMode::Prompt,
        Default::default(),
        Duration::ZERO,
        None,
    );
    gate.set_ui("http://127.0.0.1:3000/ui".into());
    let change = |what: &str| Question {
        remember: false,
        description: what.into(),
        tool: "import".into(),
        ..question("agent")
    };
    let benign = change("import `mcp.benign`: writes /h/mcp.benign");
    let e = gate.check(&benign, None).await.unwrap_err();
    assert!(e.data().get("command").is_none(), "no grant command: {e:?}");
    assert!(e.detail.contains("writes /h/mcp.benign"), "{}", e.detail);
    let pending = gate.pending();
    assert!(!pending[0].lasting);
    // "Always" counts once.
    assert_eq!(
        gate.answer(pending[0].id, Choice::Tool).unwrap(),
        "its next retry may run once"
    );
    assert!(gate.grants().is_empty());
    // Another change is not released by that approval; the approved one is, once.
    let evil = change("import `mcp.evil`: writes /h/mcp.evil");
    assert!(gate.check(&evil, None).await.is_err());
    gate.check(&benign, None).await.unwrap();
    assert!(gate.check(&benign, None).await.is_err(), "once means once");
    assert!(!benign.text().is_empty() && benign.text().contains("asked each time"));
    assert_eq!(
        benign.choices().map(|c| c.1).collect::<Vec<_>>(),
        ["once", "deny"]
    );
}

#[tokio::test]
async fn a_waiting_call_follows_the_answer_and_a_refused_one_can_be_approved() {
    let gate = std::sync::Arc::new(Gate::new(
        ConsentMode::Prompt,
        Default::default(),
        Duration::from_secs(30),
        None,
    ));
    gate.set_ui("http://127.0.0.1:3000/ui".into());
    let q = question("alpha");
    let waiting = {
        let gate = gate.clone();
        let q = q.clone();
        tokio::spawn(async move { gate.check(&q, None).await })
    };
    let id = loop {
        if let Some(p) = gate.pending().first() {
            assert!(p.waiting);
            break p.id;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        gate.answer(id, Choice::Tool).unwrap(),
        "the waiting call goes on"
    );
    waiting.await.unwrap().unwrap();
    assert!(gate.pending().is_empty());
    gate.check(&q, None).await.unwrap();
    assert!(gate.answer(id, Choice::Once).is_err(), "answered once only");

    // Without waiting: refused at once, kept for its retry, with the UI link.
    let quick = Gate::new(
        ConsentMode::Prompt,
        Default::default(),
        Duration::ZERO,
        None,
    );
    quick.set_ui("http://127.0.0.1:3000/ui".into());
    let q = question("beta");
    let e = quick.check(&q, None).await.unwrap_err();
    let pending = quick.pending();
    assert_eq!(pending.len(), 1);
    assert!(!pending[0].waiting);
    assert_eq!(
        e.data()["ui"],
        format!("http://127.0.0.1:3000/ui/consent?pending={}", pending[0].id)
    );
    // A retry replaces the entry rather than piling up.
    quick.check(&q, None).await.unwrap_err();
    let id = quick.pending()[0].id;
    assert_eq!(quick.pending().len(), 1);
    quick.answer(id, Choice::Once).unwrap();
    quick.check(&q, None).await.unwrap();
    assert!(quick.check(&q, None).await.is_err(), "once means one retry");
    let id = quick.pending()[0].id;
    quick.answer(id, Choice::Deny).unwrap();
    assert!(quick.pending().is_empty());
    assert!(
        quick.check(&q, None).await.is_err(),
        "dismissed is not allowed"
    );
    // Revoke takes a grant back.
    quick.remember("beta@stdio", "com.a", "*", None);
    quick.check(&q, None).await.unwrap();
    assert_eq!(
        quick
            .revoke("com.a", Some("*"), Some("beta@stdio"))
            .await
            .unwrap(),
        1
    );
    assert!(quick.check(&q, None).await.is_err());
}

#[tokio::test]
async fn a_grant_for_a_web_app_holds_while_its_certificate_does() {
    use crate::consent::site::{Certificate, Site};
    let gate = Gate::new(
        ConsentMode::Prompt,
        Default::default(),
        Duration::ZERO,
        None,
    );
    let site = |fp: &str| {
        Some(Site {
            origin: "https://api.example.com".into(),
            certificate: Some(Certificate {
                subject: "CN=api.example.com".into(),
                issuer: "CN=Example CA".into(),
                sha256: fp.into(),
            }),
        })
    };
    let mut q = question("alpha");
    q.site = site("AA:AA");
    assert!(q.text().ends_with(
        " — on https://api.example.com, certificate of CN=api.example.com issued by CN=Example CA, SHA-256 AA:AA"
    ));
    gate.check(&q, Some(&Fixed(Reply::Chosen(Choice::Tool))))
        .await
        .unwrap();
    gate.check(&q, None).await.unwrap();
    // Another certificate: the grant does not hold; the question shows the new one.
    q.site = site("BB:BB");
    let e = gate.check(&q, None).await.unwrap_err();
    assert_eq!(e.code, Code::ConsentRequired);
    assert!(
        gate.pending()[0]
            .site
            .as_deref()
            .unwrap()
            .ends_with("BB:BB")
    );
    // Allowed again: now tied to the new certificate only.
    gate.check(&q, Some(&Fixed(Reply::Chosen(Choice::App))))
        .await
        .unwrap();
    gate.check(&q, None).await.unwrap();
    q.site = site("AA:AA");
    assert!(
        gate.check(&q, None).await.is_ok(),
        "the tool grant still names AA:AA"
    );
    q.tool = "other".into();
    assert!(
        gate.check(&q, None).await.is_err(),
        "the app grant names BB:BB"
    );
    // A grant from the CLI or the UI form names no certificate and always holds.
    gate.remember("alpha@stdio", "com.a", "other", None);
    gate.check(&q, None).await.unwrap();
}

/// A gate that asks, with no state file and no waiting.
fn prompting() -> Gate {
    Gate::new(
        ConsentMode::Prompt,
        Default::default(),
        Duration::ZERO,
        None,
    )
}

fn start(pin: &str) -> Start {
    Start {
        shown: "npx -y some-server".into(),
        downloads: true,
        pin: pin.into(),
        allowed: false,
    }
}

#[tokio::test]
async fn starting_is_asked_with_the_call_and_tied_to_its_command() {
    let gate = prompting();
    let mut q = question("alpha");
    q.start = Some(start("p1"));
    assert!(gate.would_ask(&q));
    assert!(q.text().ends_with(
        "— this will first start `npx -y some-server` (downloads a package and runs it)"
    ));
    // A grant of the tool does not cover the start.
    gate.remember("alpha@stdio", "com.a", "send", None);
    let e = gate.check(&q, None).await.unwrap_err();
    assert_eq!(e.code, Code::ConsentRequired);
    assert!(e.data()["command"].as_str().unwrap().ends_with(" --start"));
    assert!(
        e.detail
            .contains("which will first start `npx -y some-server`"),
        "{}",
        e.detail
    );
    // "Once" starts it for this run only; "always" ties it to the command.
    gate.check(&q, Some(&Fixed(Reply::Chosen(Choice::Once))))
        .await
        .unwrap();
    assert!(gate.start_allowed("com.a", &start("p1")));
    assert!(!gate.start_allowed("com.a", &start("p2")));
    let mut changed = question("beta");
    changed.start = Some(start("p2"));
    gate.check(&changed, Some(&Fixed(Reply::Chosen(Choice::Tool))))
        .await
        .unwrap();
    assert!(gate.start_allowed("com.a", &start("p2")));
    let fresh = prompting();
    assert!(!fresh.start_allowed("com.a", &start("p1")));
    // A denied question starts nothing.
    let mut other = question("gamma");
    other.app = "com.b".into();
    other.start = Some(start("p3"));
    assert!(
        gate.check(&other, Some(&Fixed(Reply::Chosen(Choice::Deny))))
            .await
            .is_err()
    );
    assert!(!gate.start_allowed("com.b", &start("p3")));
    // The command line starts what it calls; mode `allow` starts anything.
    let mut cli = other.clone();
    cli.caller = Caller::cli();
    gate.check(&cli, None).await.unwrap();
    assert!(gate.start_allowed("com.b", &start("p3")));
    let allow = Gate::new(ConsentMode::Allow, Default::default(), Duration::ZERO, None);
    assert!(allow.start_allowed("com.b", &start("p9")));
    let per_app = [("com.b".to_owned(), ConsentMode::Deny)]
        .into_iter()
        .collect();
    let deny = Gate::new(ConsentMode::Allow, per_app, Duration::ZERO, None);
    assert!(!deny.start_allowed("com.b", &start("p9")));
}

#[tokio::test]
async fn a_start_only_question_is_answered_from_the_web_ui() {
    let gate = prompting();
    let mut q = question("alpha");
    q.tool = START.into();
    q.start = Some(start("p1"));
    let e = gate.check(&q, None).await.unwrap_err();
    assert_eq!(
        e.data()["command"],
        "aai-gateway consent grant com.a --start"
    );
    assert!(
        e.detail
            .contains("has not allowed the gateway to start `npx -y some-server`")
    );
    let pending = gate.pending();
    assert_eq!(
        pending[0].start.as_deref(),
        Some("start `npx -y some-server` (downloads a package and runs it)")
    );
    assert_eq!(
        gate.answer(pending[0].id, Choice::Tool).unwrap(),
        "the app may start from now on"
    );
    assert!(gate.start_allowed("com.a", &start("p1")));
    gate.check(&q, None).await.unwrap();
}

#[tokio::test]
async fn the_grant_command_is_quoted_for_both_shells() {
    let gate = prompting();
    let mut q = question("x'; touch /tmp/pwned; echo '");
    q.tool = "t;$(touch /tmp/p2)`id`".into();
    let e = gate.check(&q, None).await.unwrap_err();
    let command = e.data()["command"].as_str().unwrap().to_owned();
    let words = shlex::split(&command).unwrap();
    assert_eq!(
        words,
        [
            "aai-gateway",
            "consent",
            "grant",
            "com.a",
            "--tool",
            "t;$(touch /tmp/p2)`id`",
            "--caller",
            "x'; touch /tmp/pwned; echo '@stdio"
        ]
    );
    let ps = e.data()["powershellCommand"].as_str().unwrap().to_owned();
    assert_eq!(
        ps,
        "aai-gateway 'consent' 'grant' 'com.a' '--tool' 't;$(touch /tmp/p2)`id`' '--caller' 'x''; touch /tmp/pwned; echo ''@stdio'"
    );
    // A name starting with `-` stays the option's value.
    q.tool = "-rf".into();
    let e = gate.check(&q, None).await.unwrap_err();
    let words = shlex::split(e.data()["command"].as_str().unwrap()).unwrap();
    assert!(words.contains(&"--tool=-rf".to_owned()), "{words:?}");
}

#[derive(Debug)]
struct Counting {
    asked: std::sync::atomic::AtomicUsize,
    reply: Reply,
}

impl Prompter for Counting {
    fn ask<'a>(&'a self, _q: &'a Question) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let reply = self.reply.clone();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            reply
        })
    }
}

#[tokio::test]
async fn concurrent_calls_ask_once_and_an_always_answer_serves_them_all() {
    let gate = Arc::new(prompting());
    let prompter = Arc::new(Counting {
        asked: Default::default(),
        reply: Reply::Chosen(Choice::Tool),
    });
    let calls: Vec<_> = (0..40)
        .map(|_| {
            let (gate, prompter) = (gate.clone(), prompter.clone());
            tokio::spawn(async move { gate.check(&question("alpha"), Some(&*prompter)).await })
        })
        .collect();
    for c in calls {
        c.await.unwrap().unwrap();
    }
    assert_eq!(prompter.asked.load(Ordering::SeqCst), 1);
    assert!(
        gate.asking.lock().unwrap().is_empty(),
        "no turn is left behind"
    );
}

#[tokio::test]
async fn a_channel_that_cannot_ask_is_no_answer() {
    let gate = prompting();
    gate.set_ui("http://127.0.0.1:3000/ui".into());
    let broken = Counting {
        asked: Default::default(),
        reply: Reply::Unavailable("cannot open display".into()),
    };
    let e = gate
        .check(&question("alpha"), Some(&broken))
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::ConsentRequired, "not a denial: {}", e.detail);
    assert!(
        e.data()["ui"]
            .as_str()
            .unwrap()
            .contains("/consent?pending=")
    );
    let declined = Counting {
        asked: Default::default(),
        reply: Reply::Declined,
    };
    let e = gate
        .check(&question("alpha"), Some(&declined))
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::PermissionDenied);
}

#[tokio::test]
async fn a_question_closed_unanswered_is_not_a_no_and_asks_nowhere_else() {
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(&State::file_in(dir.path())).unwrap();
    let native = Arc::new(Counting {
        asked: Default::default(),
        reply: Reply::Chosen(Choice::Tool),
    });
    let gate = Gate::new(
        ConsentMode::Prompt,
        Default::default(),
        Duration::ZERO,
        Some(Arc::new(state)),
    )
    .with_native(Some(native.clone()));
    let q = question("claude-code");
    // A client that answered `cancel`: refused with how to allow it, and the desktop
    // dialog is not opened after the user (or the client) closed the question.
    let unshown = Fixed(Reply::Unshown("cancel".into()));
    let e = gate.check(&q, Some(&unshown)).await.unwrap_err();
    assert_eq!(e.code, Code::ConsentRequired);
    let command = e.data()["command"].as_str().unwrap().to_owned();
    assert!(command.contains("consent grant com.a --tool send --caller claude-code@stdio"));
    assert!(e.message().contains(&command), "{}", e.message());
    assert_eq!(native.asked.load(Ordering::SeqCst), 0);
    // The pending entry is kept for the web UI to approve.
    assert_eq!(gate.pending().len(), 1);
    // A decline stays a denial, and is not asked elsewhere either.
    let e = gate
        .check(&q, Some(&Fixed(Reply::Declined)))
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::PermissionDenied);
    assert_eq!(native.asked.load(Ordering::SeqCst), 0);
    // It says how to allow the call, for a client that declined a form it did not show.
    assert!(e.message().contains(&command), "{}", e.message());
    assert_eq!(
        gate.pending().len(),
        1,
        "a decline leaves nothing to approve"
    );
    // A channel that could not ask at all falls through to the dialog.
    let unavailable = Fixed(Reply::Unavailable("no form".into()));
    gate.check(&q, Some(&unavailable)).await.unwrap();
    assert_eq!(native.asked.load(Ordering::SeqCst), 1);
}
