//! The ACP executor against a fake agent written in `sh` (no agent, no peer): start and
//! `initialize`, a session, a prompt whose message chunks become the result, a permission
//! request answered through consent, and a turn that runs out of time being cancelled
//! with `session/cancel`.
//!
//! Run: `cargo test -p aai-gateway --test acp`

use std::sync::Arc;
use std::time::Duration;

use aai_gateway::testing::auth::store::Store;
use aai_gateway::testing::config::Config;
use aai_gateway::testing::error::Code;
use aai_gateway::testing::gateway::Gateway;
use aai_gateway::testing::host::{Host, Os};
use aai_gateway::testing::identity::Caller;
use aai_gateway::testing::pipeline::Origin;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

mod common;

/// Speaks just enough ACP: `initialize`, `session/new`, `session/prompt` (a prompt with
/// `edit` first asks for permission and reports the option chosen; one with `slow` ends
/// only when cancelled; one with `huge` sends an update of 17 MB on one line), and
/// `session/cancel` (noted in `$MARKS/cancelled`).
const AGENT: &str = r#"while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/^{"jsonrpc":"2.0","id":\([0-9][0-9]*\).*$/\1/p')
  case "$line" in
    *'"method":"initialize"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}\n' "$id" ;;
    *'"method":"session/new"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s1"}}\n' "$id" ;;
    *'"method":"session/cancel"'*)
      echo cancel >> "$MARKS/cancelled"
      [ -n "$slow" ] && printf '{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"cancelled"}}\n' "$slow" ;;
    *'"method":"session/prompt"'*)
      case "$line" in
        *slow*) slow=$id ;;
        *huge*)
          printf '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
          head -c 17000000 /dev/zero | tr '\0' x
          printf '"}}}}\n' ;;
        *edit*)
          printf '{"jsonrpc":"2.0","id":"perm-1","method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t1","title":"Edit main.rs","kind":"edit"},"options":[{"optionId":"yes","name":"Allow","kind":"allow_once"},{"optionId":"no","name":"Reject","kind":"reject_once"}]}}\n'
          IFS= read -r answer
          chosen=$(printf '%s' "$answer" | sed -n 's/.*"optionId":"\([a-z]*\)".*/\1/p')
          printf '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"permission: %s"}}}}\n' "$chosen"
          printf '{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}\n' "$id" ;;
        *)
          printf '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello "}}}}\n'
          printf '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"from sh"}}}}\n'
          printf '{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}\n' "$id" ;;
      esac ;;
  esac
done"#;

/// `timeout_ms` bounds a turn, and the agent's start with it.
fn gateway(
    home: &std::path::Path,
    marks: &std::path::Path,
    consent: &str,
    timeout_ms: u64,
) -> Arc<Gateway> {
    common::put(
        home,
        &json!({
            "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": "com.example.agent", "name": {"en": "Fake agent"}, "defaultLang": "en",
                    "description": "Speaks ACP from sh"},
            "execution": {"type": "acp",
                          "start": {"command": "sh", "args": ["-c", AGENT],
                                    "env": {"MARKS": marks.to_str().unwrap()}},
                          "timeout": timeout_ms},
            "tools": [{"name": "ask", "description": "Give the agent a task",
                       "parameters": {"type": "object",
                                      "properties": {"prompt": {"type": "string"}},
                                      "required": ["prompt"]}}]
        }),
    );
    let (config, _) = Config::parse(
        &json!({"consent": {"mode": consent}}).to_string(),
        &home.join("config.json"),
    )
    .unwrap();
    let gateway = Gateway::with_parts(
        config,
        home.to_owned(),
        None,
        Host::new(Os::Linux),
        common::dirs(home),
        Store::memory(),
    );
    gateway.rescan();
    gateway
}

async fn ask(
    gateway: &Gateway,
    prompt: &str,
) -> Result<Value, aai_gateway::testing::error::GatewayError> {
    let origin = Origin {
        caller: Caller {
            name: "test".into(),
            transport: "stdio",
            token: None,
            person: None,
        },
        prompter: None,
        client: None,
        trace: None,
        within: None,
    };
    gateway
        .pipeline()
        .call(
            "com.example.agent",
            "ask",
            Some(json!({"prompt": prompt})),
            CancellationToken::new(),
            None,
            &origin,
        )
        .await
        .map(|o| o.value)
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_prompt_becomes_the_agents_text_and_a_permission_goes_through_consent() {
    let (home, marks) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let gw = gateway(home.path(), marks.path(), "allow", 30_000);
    let result = ask(&gw, "say hello").await.unwrap();
    assert!(text_of(&result).starts_with("hello from sh"), "{result}");
    assert_eq!(result["structuredContent"]["sessionId"], "s1", "{result}");
    assert_eq!(result["structuredContent"]["stopReason"], "end_turn");
    // The agent asks to edit: consent (mode `allow`) answers with its allow option.
    let result = ask(&gw, "edit the file").await.unwrap();
    assert!(text_of(&result).starts_with("permission: yes"), "{result}");
    gw.stop();
}

#[tokio::test]
async fn a_permission_nobody_can_answer_is_refused_not_left_hanging() {
    let (home, marks) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let gw = gateway(home.path(), marks.path(), "prompt", 30_000);
    // The call itself and the agent's start (tied to its command) are granted; the edit
    // is not, and there is no channel to ask on and no time to wait.
    let snapshot = gw.snapshot().await;
    let entry = snapshot.find("com.example.agent").unwrap();
    let start = aai_gateway::testing::exec::start::start_of(
        &entry.binding().executor,
        aai_gateway::testing::pipeline::base_dir(entry),
    )
    .unwrap();
    let consent = &gw.pipeline().consent();
    consent.remember("test@stdio", "com.example.agent", "ask", None);
    consent.remember("*", "com.example.agent", "@start", Some(&start.pin));
    let result = ask(&gw, "edit the file").await.unwrap();
    assert!(text_of(&result).starts_with("permission: no"), "{result}");
    gw.stop();
}

#[tokio::test]
async fn a_turn_out_of_time_is_cancelled_and_names_its_session() {
    let (home, marks) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let gw = gateway(home.path(), marks.path(), "allow", 1_500);
    let e = ask(&gw, "be slow").await.unwrap_err();
    assert_eq!(e.code, Code::Timeout, "{e}");
    assert_eq!(e.data()["sessionId"], "s1", "{e}");
    // The agent heard `session/cancel`.
    let cancelled = marks.path().join("cancelled");
    for _ in 0..250 {
        if cancelled.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(cancelled.exists(), "no session/cancel reached the agent");
    gw.stop();
}

#[tokio::test]
async fn a_line_over_the_limit_stops_the_agent_and_fails_the_call_with_the_reason() {
    let (home, marks) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let gw = gateway(home.path(), marks.path(), "allow", 30_000);
    let e = ask(&gw, "be huge").await.unwrap_err();
    // Not the turn's timeout: the line itself ended the conversation.
    assert_eq!(e.code, Code::AppNotRunning, "{e}");
    assert!(e.detail.contains("longer than 16777216 bytes"), "{e}");
    // The next call starts the agent again.
    let answer = ask(&gw, "hi").await.unwrap();
    assert!(text_of(&answer).starts_with("hello from sh"), "{answer}");
    gw.stop();
}
