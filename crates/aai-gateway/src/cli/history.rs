//! `history`: the calls the gateway ran, newest first, filtered.

use std::io::Write;
use std::process::ExitCode;

use super::Context;
use super::table::Table;
use crate::history::{self, Filter};

pub(super) use crate::history::since;
use crate::history::utc;

pub(super) fn run(ctx: &Context, filter: &Filter, json: bool) -> ExitCode {
    let file = crate::consent::state::State::file_in(&ctx.home);
    let records = if let Some(settings) = &ctx.config.store {
        // The shared store: every replica's calls.
        let read = crate::store::Shared::without_key(settings)
            .map_err(|e| e.to_string())
            .and_then(|shared| {
                super::runtime()?
                    .block_on(history::rows_shared(&shared, filter))
                    .map_err(|e| e.to_string())
            });
        match read {
            Ok(rows) => rows.into_iter().map(|(_, r)| r).collect(),
            Err(e) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "aai-gateway: cannot read the history: {e}"
                );
                return ExitCode::FAILURE;
            }
        }
    } else if file.exists() {
        match history::query(&file, filter) {
            Ok(r) => r,
            Err(e) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "aai-gateway: cannot read the history: {e}"
                );
                return ExitCode::FAILURE;
            }
        }
    } else {
        Vec::new()
    };
    let mut out = std::io::stdout().lock();
    if json {
        let body = serde_json::json!({ "calls": records });
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&body).expect("JSON")
        );
        return ExitCode::SUCCESS;
    }
    if records.is_empty() {
        let _ = writeln!(out, "No calls recorded.");
        return ExitCode::SUCCESS;
    }
    let mut table = Table::new(&["TIME (UTC)", "CALLER", "APP", "TOOL", "STATUS", "MS"]);
    for r in &records {
        let status = match &r.code {
            Some(code) => format!("{} {code}", r.status),
            None => r.status.clone(),
        };
        table.row(vec![
            utc(r.at_ms),
            r.caller.clone(),
            match &r.asked {
                Some(asked) => format!("{} (as {asked})", r.app),
                None => r.app.clone(),
            },
            r.tool.clone(),
            status,
            r.duration_ms.to_string(),
        ]);
    }
    let _ = write!(out, "{}", table.render());
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_and_durations() {
        assert_eq!(crate::history::utc(0), "1970-01-01 00:00:00");
        assert_eq!(
            crate::history::utc(1_795_401_000_000),
            "2026-11-23 02:30:00"
        );
        let now = crate::history::now_ms();
        let hour_ago = super::since("1h").unwrap();
        assert!(now - hour_ago >= 3_600_000 && now - hour_ago < 3_610_000);
        assert!(super::since("3 weeks").is_err());
    }
}
