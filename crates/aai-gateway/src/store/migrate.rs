//! The shared store's schema, versioned: the migrations are SQL files compiled in, applied
//! in order at start, each with its row in `aai_schema_migrations`. All of them run in one
//! transaction that first takes a transaction-level advisory lock, so replicas starting
//! together apply them once (the second waits, then finds nothing to do), and a failure
//! leaves the database as it was. A database at a version this binary does not know (a
//! newer gateway migrated it) is refused.

use crate::store::Error;

/// Every migration: version (1, 2, … with no gap), what it does, its SQL.
pub(crate) const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "grants, pending consent, history, credentials",
        include_str!("migrations/0001_shared_store.sql"),
    ),
    (
        2,
        "tool definitions of grants, fingerprints in history",
        include_str!("migrations/0002_tool_fingerprints.sql"),
    ),
    (
        3,
        "the script run or batch of each call in history",
        include_str!("migrations/0003_history_runs.sql"),
    ),
    (
        4,
        "rate limit buckets shared by the replicas",
        include_str!("migrations/0004_rate_buckets.sql"),
    ),
];

/// The advisory lock key of migrations (any constant every replica shares: "aai-gw-m").
const LOCK: i64 = 0x6161_692d_6777_2d6d;

/// The newest version this binary knows.
pub fn latest() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// The migrations a database at `found` needs, in order; an error for one newer than this
/// binary.
pub(crate) fn plan(
    found: i64,
    at: &str,
) -> Result<Vec<&'static (i64, &'static str, &'static str)>, Error> {
    if found > latest() {
        return Err(Error::Newer {
            at: at.to_owned(),
            found,
            known: latest(),
        });
    }
    Ok(MIGRATIONS.iter().filter(|m| m.0 > found).collect())
}

/// Applies what the database lacks (see the module); the version it is at.
pub(crate) async fn run(
    client: &mut deadpool_postgres::Object,
    at: &str,
) -> Result<Result<i64, Error>, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS aai_schema_migrations (
             version BIGINT PRIMARY KEY,
             description TEXT NOT NULL,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .await?;
    let found: i64 = tx
        .query_one(
            "SELECT COALESCE(max(version), 0) FROM aai_schema_migrations",
            &[],
        )
        .await?
        .get(0);
    let todo = match plan(found, at) {
        Ok(todo) => todo,
        Err(e) => {
            tx.rollback().await?;
            return Ok(Err(e));
        }
    };
    for (version, description, sql) in &todo {
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO aai_schema_migrations (version, description) VALUES ($1, $2)",
            &[version, description],
        )
        .await?;
        tracing::info!("the PostgreSQL store {at} migrated to version {version} ({description})");
    }
    tx.commit().await?;
    Ok(Ok(found.max(latest())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_without_gaps_and_planned_in_order() {
        for (i, (version, description, sql)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(*version, i as i64 + 1, "{description}");
            assert!(!sql.trim().is_empty() && !description.is_empty());
            // One transaction applies them: none may manage its own.
            let upper = sql.to_uppercase();
            assert!(
                !upper.contains("COMMIT") && !upper.contains("BEGIN;"),
                "{description}"
            );
        }
        assert_eq!(plan(0, "x").unwrap().len(), MIGRATIONS.len());
        assert!(plan(latest(), "x").unwrap().is_empty());
        let e = plan(latest() + 1, "postgres://u@h/db").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(&format!("schema version {}", latest() + 1))
                && text.contains("upgrade this gateway"),
            "{text}"
        );
    }
}
