//! A call of the gateway's own app (`aai`: import, remove, hide), planned, asked about
//! with exactly what it will do, then done.

use serde_json::Value;

use super::{Error, Origin, Outcome, Pipeline, not_served};
use crate::error::GatewayError;
use crate::registry::Snapshot;
use crate::telemetry;

impl Pipeline {
    /// A call of the gateway's own app (`manage`): planned (a preview answers at once,
    /// having written nothing), then asked about with exactly what it will do — an answer
    /// is never remembered, each change is asked about —, then done, and the apps looked
    /// at again so that the next call sees the change. An import's approval also allows
    /// what the imported app starts on first use, for this run. The question names the
    /// tool as the caller knows it (a renamed one by its new name).
    pub(super) async fn manage(
        &self,
        snapshot: &Snapshot,
        entry: &crate::registry::Entry,
        tool: &aai_descriptor::Tool,
        args: &Value,
        origin: &Origin,
        spans: &telemetry::Call,
    ) -> Result<Outcome, GatewayError> {
        let manager = self
            .manage
            .as_ref()
            .ok_or_else(|| GatewayError::from(Error::NoManager))?;
        let all = self.snapshot().await;
        let step = manager
            .plan(
                &tool.as_defined().name,
                args,
                &origin.caller.name,
                snapshot,
                &all,
            )
            .await
            .map_err(|e| match e {
                crate::manage::Error::Unknown(app) => not_served(snapshot, &app, self.settings.os),
                e => e.into(),
            })?;
        let change = match step {
            crate::manage::Step::Preview(value) => {
                return Ok(Outcome {
                    value,
                    structured: false,
                    mcp: false,
                });
            }
            crate::manage::Step::Change(change) => change,
        };
        let question = crate::consent::Question {
            remember: false,
            ..crate::consent::Question::for_call(
                &origin.caller,
                &entry.app.id,
                snapshot.name(entry),
                &tool.name,
                change.describe(),
            )
        };
        self.asked(&question, origin, spans).await?;
        for (app, start) in change.starts() {
            self.consent.allow_start_now(app, start);
        }
        let value = manager.apply(change, self.auth.store()).await?;
        self.apps.refresh().await;
        Ok(Outcome {
            value,
            structured: false,
            mcp: false,
        })
    }
}
