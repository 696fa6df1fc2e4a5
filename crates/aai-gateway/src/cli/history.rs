//! `history`: the calls the gateway ran, newest first, filtered.

use std::io::Write;
use std::process::ExitCode;

use super::Context;
use super::table::Table;
use crate::history::{self, Filter};

/// `1h`, `30m`, `2d`, `45s`, or seconds: how far back.
pub(super) fn since(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().find(|(_, c)| c.is_alphabetic()) {
        Some((i, _)) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration such as 30m, 2h or 7d"))?;
    let secs = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        "d" => n.saturating_mul(86_400),
        _ => return Err(format!("`{text}`: the unit must be s, m, h or d")),
    };
    Ok(history::now_ms().saturating_sub(secs.saturating_mul(1000)))
}

pub(super) fn run(ctx: &Context, filter: &Filter, json: bool) -> ExitCode {
    let file = crate::state::State::file_in(&ctx.home);
    let records = if file.exists() {
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
            r.app.clone(),
            r.tool.clone(),
            status,
            r.duration_ms.to_string(),
        ]);
    }
    let _ = write!(out, "{}", table.render());
    ExitCode::SUCCESS
}

/// `2026-11-23 02:30:00` for Unix milliseconds (civil date from days, no time zone data).
fn utc(at_ms: u64) -> String {
    let secs = at_ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_and_durations() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00");
        assert_eq!(super::utc(1_795_401_000_000), "2026-11-23 02:30:00");
        let now = crate::history::now_ms();
        let hour_ago = super::since("1h").unwrap();
        assert!(now - hour_ago >= 3_600_000 && now - hour_ago < 3_610_000);
        assert!(super::since("3 weeks").is_err());
    }
}
