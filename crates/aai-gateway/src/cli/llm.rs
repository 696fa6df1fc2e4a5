//! An OpenAI-compatible chat-completions client (OpenAI, Ollama, LM Studio, vLLM, …) for
//! `--generate`. Each turn asks for a stream (server-sent events) and reads whatever the
//! server sends: events, or one JSON answer from servers that do not stream.
//!
//! The key goes only in the `Authorization` header; error texts are scrubbed of it
//! (services echo a wrong key back) and show the server's origin only.

use std::time::Duration;

use serde_json::{Value, json};

use crate::auth::Secret;
use crate::net::{self, Purpose};

/// Largest answer read (a descriptor is a few hundred KiB at most).
const MAX_ANSWER: usize = 8 * 1024 * 1024;

/// A chat-completions endpoint and model.
#[derive(Debug)]
pub(super) struct Chat {
    /// Base URL, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`.
    pub(super) base_url: String,
    /// Model name.
    pub(super) model: String,
    /// Bearer key, when the service needs one (local servers usually do not).
    pub(super) key: Option<Secret>,
    /// Time for one whole answer.
    pub(super) timeout: Duration,
}

pub(super) use aai_author::generate::Message;

impl Chat {
    /// Sends the conversation and returns the answer's text; `progress` is told how many
    /// characters have arrived as they stream in.
    pub(super) async fn complete(
        &self,
        messages: &[Message],
        progress: &mut dyn FnMut(usize),
    ) -> Result<String, String> {
        let url = reqwest::Url::parse(&format!(
            "{}/chat/completions",
            self.base_url.trim_end_matches('/')
        ))
        .map_err(|e| format!("generate.baseUrl `{}` is not a URL: {e}", self.base_url))?;
        net::check_fetchable(&url).map_err(|e| format!("generate.baseUrl: {e}"))?;
        let shown = net::redact(&url);
        let client = net::client(Purpose::Api).map_err(|e| e.to_string())?;
        let body = json!({
            "model": self.model,
            "messages": messages.iter().map(|m| json!({"role": m.role, "content": m.content})).collect::<Vec<_>>(),
            "stream": true,
            "temperature": 0,
        });
        let mut request = client.post(url).json(&body).timeout(self.timeout);
        if let Some(key) = &self.key {
            request = request.bearer_auth(key.expose());
        }
        let mut response = request.send().await.map_err(|e| {
            self.scrub(&format!(
                "cannot reach the model service: {}",
                net::describe(&e)
            ))
        })?;
        let status = response.status();
        let streamed = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if !status.is_success() {
            let body = net::read_capped(response, 64 * 1024)
                .await
                .unwrap_or_default();
            let excerpt: String = String::from_utf8_lossy(&body)
                .trim()
                .chars()
                .take(300)
                .collect();
            return Err(self.scrub(&format!("{shown} answered {status}: {excerpt}")));
        }
        if !streamed {
            let body = net::read_capped(response, MAX_ANSWER)
                .await
                .map_err(|e| self.scrub(&format!("{shown}: {e}")))?;
            let doc: Value = serde_json::from_slice(&body)
                .map_err(|e| format!("{shown} did not answer JSON: {e}"))?;
            let text = doc["choices"][0]["message"]["content"]
                .as_str()
                .ok_or_else(|| format!("{shown} answered without `choices[0].message.content`"))?;
            progress(text.chars().count());
            return Ok(text.to_owned());
        }
        let mut text = String::new();
        let mut pending: Vec<u8> = Vec::new();
        let mut received = 0usize;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.scrub(&format!("the answer broke off: {}", net::describe(&e))))?
        {
            received += chunk.len();
            if received > MAX_ANSWER {
                return Err(format!(
                    "the answer is larger than {} MiB",
                    MAX_ANSWER / 1024 / 1024
                ));
            }
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                let Some(data) = line.trim().strip_prefix("data:") else {
                    continue;
                };
                let data = data.trim();
                if data == "[DONE]" {
                    return Ok(text);
                }
                let Ok(event) = serde_json::from_str::<Value>(data) else {
                    continue;
                };
                if let Some(error) = event.get("error") {
                    return Err(self.scrub(&format!("the model service failed: {error}")));
                }
                if let Some(delta) = event["choices"][0]["delta"]["content"].as_str() {
                    text.push_str(delta);
                    progress(text.chars().count());
                }
            }
        }
        Ok(text)
    }

    /// `message` without the key in it, in any of the forms services echo it in (plain,
    /// percent-encoded, base64).
    fn scrub(&self, message: &str) -> String {
        let Some(key) = self.key.as_ref().filter(|k| !k.expose().is_empty()) else {
            return message.to_owned();
        };
        let mut out = message.to_owned();
        for form in crate::auth::echoes(std::iter::once(key.expose())) {
            out = out.replace(&form, "***");
        }
        out
    }
}
