//! The shared PostgreSQL store against a real server the test starts (`common/pg.rs`):
//! migrations, credentials sealed at rest, consent grants shared by two replicas, and the
//! call history with its retention. One cluster for the binary, one database per part;
//! without PostgreSQL's binaries it skips, or fails with `AAI_TEST_REQUIRE_PEERS=1`.
//!
//! Run: `cargo test -p aai-gateway --test store`

#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aai_gateway::testing::auth::Secret;
use aai_gateway::testing::auth::store::{self as credentials, Credential, Store};
use aai_gateway::testing::config::{Config, ConsentMode};
use aai_gateway::testing::consent::Gate;
use aai_gateway::testing::consent::state::Grant;
use aai_gateway::testing::history::{
    Filter, Postgres, Record, Retention, Sink, now_ms, rows_shared,
};
use aai_gateway::testing::store::{Error, Shared, latest};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[path = "common/pg.rs"]
mod pg;

/// Two credential keys (64 hex digits each); replicas of one team share the first.
const KEY: &str = "4f1c2a9e8b7d6c5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e";
const OTHER_KEY: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";
/// The credential stored; it must never appear in the database.
const SECRET: &str = "sk-live-Zq8vN3pT6wR1yU4iO7aS";

/// How long a change may take to reach the other replica. Their poll while listening is
/// every 30 s: seeing it sooner means the notification carried it.
const SHARED_WITHIN: Duration = Duration::from_secs(5);

#[test]
fn the_shared_store_on_a_real_postgresql() {
    let started = Instant::now();
    let Some(cluster) = pg::Cluster::start() else {
        return;
    };
    for db in [
        "migrate",
        "race",
        "credentials",
        "consent",
        "history",
        "buckets",
    ] {
        cluster.create_db(db);
    }
    eprintln!("the cluster and its databases: {:?}", started.elapsed());
    // Dropped before the cluster: every connection of the test is closed first.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let step = Instant::now();
        migrations_run_once_and_a_newer_database_is_refused(&cluster).await;
        eprintln!("migrations: {:?}", step.elapsed());
        let step = Instant::now();
        credentials_are_sealed_at_rest_and_open_with_the_key_only(&cluster).await;
        eprintln!("credentials: {:?}", step.elapsed());
        let step = Instant::now();
        grants_made_on_one_replica_reach_the_other(&cluster).await;
        eprintln!("consent: {:?}", step.elapsed());
        let step = Instant::now();
        the_history_is_written_and_trimmed(&cluster).await;
        eprintln!("history: {:?}", step.elapsed());
        let step = Instant::now();
        replicas_taking_at_once_share_one_bucket(&cluster).await;
        eprintln!("rate buckets: {:?}", step.elapsed());
    });
}

/// Two replicas taking 40 calls at once from one bucket of 5 (refilling at one an hour):
/// exactly 5 are granted, and an empty bucket says how long until the next call.
async fn replicas_taking_at_once_share_one_bucket(cluster: &pg::Cluster) {
    let (a, b) = (
        shared(cluster, "buckets", None),
        shared(cluster, "buckets", None),
    );
    a.migrate().await.unwrap();
    let rate = 1.0 / 3600.0;
    let takes = (0..40).map(|i| {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        tokio::spawn(async move { store.take_call("app", "com.example.x", 5.0, rate).await })
    });
    let mut granted = 0;
    for take in takes {
        match take.await.unwrap().unwrap() {
            None => granted += 1,
            Some(wait) => assert!(wait > 3000.0 && wait <= 3600.0, "{wait}"),
        }
    }
    assert_eq!(granted, 5);
    // Another key has a bucket of its own.
    assert_eq!(
        a.take_call("app", "com.example.y", 5.0, rate)
            .await
            .unwrap(),
        None
    );
}

/// The store of database `db`, with the credential key `key` (or none), as
/// `config.json` names it.
fn shared(cluster: &pg::Cluster, db: &str, key: Option<&'static str>) -> Arc<Shared> {
    let text =
        json!({"store": {"url": cluster.url(db), "timeoutSeconds": 5, "connectTimeoutSeconds": 5}})
            .to_string();
    let (config, _) = Config::parse(&text, std::path::Path::new("/nonexistent/config.json"))
        .expect("the store config is valid");
    let settings = config.store.as_ref().expect("config names a store");
    match key {
        Some(key) => Shared::new(settings, &|name| {
            (name == "AAI_STORE_KEY").then(|| key.to_owned())
        })
        .unwrap(),
        None => Shared::without_key(settings).unwrap(),
    }
}

/// The rows of `sql`, each column read as text.
async fn text_rows(shared: &Shared, sql: &str) -> Vec<Vec<Option<String>>> {
    let client = shared.client().await.unwrap();
    client
        .simple_query(sql)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
            }
            _ => None,
        })
        .collect()
}

/// One text value of `sql`.
async fn one(shared: &Shared, sql: &str) -> String {
    let rows = text_rows(shared, sql).await;
    assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
    rows[0][0].clone().expect("not NULL")
}

async fn migrations_run_once_and_a_newer_database_is_refused(cluster: &pg::Cluster) {
    let store = shared(cluster, "migrate", None);
    assert!(latest() >= 2, "two migrations at least: {}", latest());
    let versions = "SELECT string_agg(version::TEXT || '@' || applied_at::TEXT, ',' ORDER BY version) FROM aai_schema_migrations";

    // An empty database gets every table, and a row per migration.
    assert_eq!(store.migrate().await.unwrap(), latest());
    assert_eq!(
        text_rows(
            &store,
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1"
        )
        .await,
        [
            "aai_credentials",
            "aai_grants",
            "aai_history",
            "aai_pending",
            "aai_rate_buckets",
            "aai_schema_migrations"
        ]
        .map(|t| vec![Some(t.to_owned())])
    );
    let numbers: Vec<String> = (1..=latest()).map(|v| v.to_string()).collect();
    assert_eq!(
        one(
            &store,
            "SELECT string_agg(version::TEXT, ',' ORDER BY version) FROM aai_schema_migrations"
        )
        .await,
        numbers.join(",")
    );
    // What the later migrations add is there too.
    assert_eq!(
        one(
            &store,
            "SELECT string_agg(table_name || '.' || column_name, ',' ORDER BY table_name) FROM information_schema.columns WHERE table_schema = 'public' AND column_name IN ('definition', 'fingerprint')"
        )
        .await,
        "aai_grants.definition,aai_history.fingerprint"
    );
    let applied = one(&store, versions).await;

    // Again: nothing to do, nothing applied again.
    assert_eq!(store.migrate().await.unwrap(), latest());
    assert_eq!(one(&store, versions).await, applied);

    // Replicas that start together: the advisory lock applies each migration once.
    let (a, b) = (shared(cluster, "race", None), shared(cluster, "race", None));
    let (ra, rb) = tokio::join!(a.migrate(), b.migrate());
    assert_eq!((ra.unwrap(), rb.unwrap()), (latest(), latest()));
    assert_eq!(
        one(&a, "SELECT count(*) FROM aai_schema_migrations").await,
        latest().to_string()
    );

    // A database a newer gateway migrated is refused, and left as it was.
    let newer = latest() + 1;
    store
        .client()
        .await
        .unwrap()
        .execute(
            "INSERT INTO aai_schema_migrations (version, description) VALUES ($1, 'from a newer gateway')",
            &[&newer],
        )
        .await
        .unwrap();
    let e = store.migrate().await.unwrap_err();
    match &e {
        Error::Newer { at, found, known } => {
            assert_eq!((*found, *known), (newer, latest()));
            // The URL is named without its password.
            assert_eq!(*at, cluster.url("migrate").replace(pg::PASSWORD, "***"));
        }
        other => panic!("expected Error::Newer, got {other:?}"),
    }
    let text = e.to_string();
    assert!(
        text.contains(&format!(
            "schema version {newer}, newer than this gateway knows ({})",
            latest()
        )) && text.contains("upgrade this gateway")
            && !text.contains(pg::PASSWORD),
        "{text}"
    );
    assert_eq!(
        one(&store, "SELECT count(*) FROM aai_schema_migrations").await,
        newer.to_string()
    );
}

async fn credentials_are_sealed_at_rest_and_open_with_the_key_only(cluster: &pg::Cluster) {
    let replica = shared(cluster, "credentials", Some(KEY));
    assert_eq!(replica.migrate().await.unwrap(), latest());
    let store = Store::Postgres(replica.clone());
    let credential = Credential::ApiKey {
        value: Secret::new(SECRET),
    };
    store
        .set("com.example.api", credential.clone())
        .await
        .unwrap();

    // The row: the account, a 24-byte nonce, the key's id, and ciphertext exactly as long
    // as the JSON it seals plus the 16-byte tag, in which the secret does not appear.
    let client = replica.client().await.unwrap();
    let rows = client
        .query(
            "SELECT account, nonce, sealed, key_id FROM aai_credentials",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let (account, nonce, sealed, key_id): (String, Vec<u8>, Vec<u8>, String) = (
        rows[0].get(0),
        rows[0].get(1),
        rows[0].get(2),
        rows[0].get(3),
    );
    assert_eq!(account, "com.example.api");
    assert_eq!(nonce.len(), 24);
    assert_eq!(key_id, replica.key().unwrap().id());
    let clear = json!({"type": "apiKey", "value": SECRET}).to_string();
    assert_eq!(sealed.len(), clear.len() + 16);
    assert!(!sealed.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()));
    // Nor anywhere in the row as the database shows it (bytea as hex).
    let shown = one(
        &replica,
        "SELECT string_agg(c::TEXT, ',') FROM aai_credentials c",
    )
    .await;
    let hex: String = SECRET.bytes().map(|b| format!("{b:02x}")).collect();
    assert!(!shown.contains(SECRET) && !shown.contains(&hex));

    // Read back through the store: here, and on another replica with the same key.
    assert_eq!(
        store.get("com.example.api").await.unwrap(),
        Some(credential.clone())
    );
    let same_key = Store::Postgres(shared(cluster, "credentials", Some(KEY)));
    assert_eq!(
        same_key.get("com.example.api").await.unwrap(),
        Some(credential.clone())
    );

    // Another key is named as such, with both ids, and shows nothing of the value.
    let other = shared(cluster, "credentials", Some(OTHER_KEY));
    let other_id = other.key().unwrap().id().to_owned();
    assert_ne!(other_id, key_id);
    let e = Store::Postgres(other)
        .get("com.example.api")
        .await
        .unwrap_err();
    match &e {
        credentials::Error::Shared(Error::WrongKey {
            account,
            stored,
            ours,
        }) => assert_eq!(
            (account.as_str(), stored, ours),
            ("com.example.api", &key_id, &other_id)
        ),
        other => panic!("expected WrongKey, got {other:?}"),
    }
    let text = e.to_string();
    assert_eq!(
        text,
        format!(
            "the stored credential `com.example.api` was encrypted with another key (key id {key_id}; this gateway's key is {other_id}): every replica needs the same AAI_STORE_KEY or store.keyFile"
        )
    );
    // Without a key: refused before anything is read.
    let e = Store::Postgres(shared(cluster, "credentials", None))
        .get("com.example.api")
        .await
        .unwrap_err();
    assert!(
        matches!(e, credentials::Error::Shared(Error::NoKey)),
        "{e:?}"
    );

    // A row copied onto another account does not open: the account is bound in.
    client
        .execute(
            "INSERT INTO aai_credentials (account, nonce, sealed, key_id)
             SELECT 'com.example.other', nonce, sealed, key_id FROM aai_credentials WHERE account = 'com.example.api'",
            &[],
        )
        .await
        .unwrap();
    let e = store.get("com.example.other").await.unwrap_err();
    assert!(
        matches!(&e, credentials::Error::Shared(Error::Decrypt(a)) if a == "com.example.other"),
        "{e:?}"
    );

    // Forgotten: the row is gone.
    assert!(store.delete("com.example.api").await.unwrap());
    assert!(!store.delete("com.example.api").await.unwrap());
    assert_eq!(store.get("com.example.api").await.unwrap(), None);
    assert_eq!(
        one(
            &replica,
            "SELECT string_agg(account, ',') FROM aai_credentials"
        )
        .await,
        "com.example.other"
    );
}

/// A gate of one replica on the store of `db`, following the others until `stop`.
async fn replica_gate(cluster: &pg::Cluster, db: &str, stop: &CancellationToken) -> Arc<Gate> {
    let gate = Arc::new(
        Gate::new(
            ConsentMode::Prompt,
            BTreeMap::new(),
            Duration::from_secs(60),
            None,
        )
        .with_shared(Some(shared(cluster, db, None))),
    );
    gate.open_shared(stop.clone()).await.unwrap();
    gate
}

/// Waits (at most [`SHARED_WITHIN`]) until `gate`'s grants in memory are `want`.
async fn until_grants(gate: &Gate, want: &[Grant], what: &str) -> Duration {
    let start = Instant::now();
    loop {
        if gate.grants() == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < SHARED_WITHIN,
            "{what}: not seen within {SHARED_WITHIN:?}: {:?}",
            gate.grants()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn grants_made_on_one_replica_reach_the_other(cluster: &pg::Cluster) {
    shared(cluster, "consent", None).migrate().await.unwrap();
    let stop = CancellationToken::new();
    let a = replica_gate(cluster, "consent", &stop).await;
    let b = replica_gate(cluster, "consent", &stop).await;
    // Both listen before anything changes: from then on only a notification is quicker
    // than their 30-second poll.
    let watcher = shared(cluster, "consent", None);
    let start = Instant::now();
    while one(
        &watcher,
        "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN aai_gateway'",
    )
    .await
        != "2"
    {
        assert!(
            start.elapsed() < SHARED_WITHIN,
            "the replicas never listened"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(a.grants().is_empty() && b.grants().is_empty());

    let cert = "sha256:0f:1e:2d:3c";
    a.remember(
        "claude@stdio",
        "com.example.notes",
        "create_note",
        Some(cert),
    );
    let grant = Grant {
        caller: "claude@stdio".into(),
        app: "com.example.notes".into(),
        tool: "create_note".into(),
        granted_at: 0,
        cert: Some(cert.into()),
        definition: None,
    };
    let took = until_grants(&b, std::slice::from_ref(&grant), "a grant made on A, on B").await;
    eprintln!("a grant reached the other replica in {took:?}");
    // The database's row, as both list it.
    let now_s = now_ms() / 1000;
    let listed = b.grants_listed().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed[0].granted_at.abs_diff(now_s) <= 5, "{listed:?}");
    assert_eq!(
        listed[0],
        Grant {
            granted_at: listed[0].granted_at,
            ..grant.clone()
        }
    );
    assert_eq!(a.grants_listed().await.unwrap(), listed);

    // A revoke on B reaches A.
    assert_eq!(
        b.revoke("com.example.notes", Some("create_note"), None)
            .await
            .unwrap(),
        1
    );
    assert_eq!(b.grants(), []);
    let took = until_grants(&a, &[], "a revoke made on B, on A").await;
    eprintln!("a revoke reached the other replica in {took:?}");
    assert_eq!(a.grants_listed().await.unwrap(), []);
    stop.cancel();
}

/// A record of a call to `tool` at `at_ms`.
fn call(tool: &str, at_ms: u64, ok: bool) -> Record {
    Record {
        at_ms,
        caller: "claude@stdio".into(),
        person: Some("ana@example.com".into()),
        app: "com.example.notes".into(),
        asked: Some("notes".into()),
        tool: tool.into(),
        args: json!({"title": "groceries", "items": [1, 2]}),
        status: if ok { "ok" } else { "error" }.into(),
        code: (!ok).then(|| "INVALID_PARAMS".into()),
        duration_ms: 12,
        excerpt: format!("{tool} done"),
        fingerprint: Some(format!("fp-{tool}")),
        run: None,
    }
}

/// Every record of the store, newest first.
async fn history(store: &Shared) -> Vec<Record> {
    let filter = Filter {
        limit: 100,
        ..Filter::default()
    };
    rows_shared(store, &filter)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, r)| r)
        .collect()
}

/// Waits until the sink has stored what it took (the wait blocks: off the runtime's
/// workers).
fn flush(sink: &Postgres) {
    tokio::task::block_in_place(|| sink.flush(Duration::from_secs(10)));
}

async fn the_history_is_written_and_trimmed(cluster: &pg::Cluster) {
    let first = shared(cluster, "history", None);
    assert_eq!(first.migrate().await.unwrap(), latest());
    // Read as the `history` command would, in a process of its own: the writer's
    // connections are its thread's, and end with it.
    let reader = shared(cluster, "history", None);
    let now = now_ms();
    let day = 86_400_000;
    let (old, r1, r2, r3) = (
        call("old", now - 40 * day, true),
        call("one", now - 3000, true),
        call("two", now - 2000, false),
        call("three", now - 1000, true),
    );
    let sink = Postgres::start(
        first.clone(),
        Retention {
            days: 30,
            rows: 1000,
        },
    )
    .unwrap();
    for r in [&old, &r1, &r2, &r3] {
        sink.record(r.clone());
    }
    flush(&sink);
    drop(sink);
    assert_eq!(
        history(&reader).await,
        [r3.clone(), r2.clone(), r1.clone(), old.clone()]
    );
    // Each row names its replica and its place in that replica's sequence.
    assert_eq!(
        text_rows(
            &reader,
            "SELECT replica, seq::TEXT FROM aai_history ORDER BY id"
        )
        .await,
        (1..=4)
            .map(|seq| vec![Some(first.replica().to_owned()), Some(seq.to_string())])
            .collect::<Vec<_>>()
    );

    // The next start (another replica id) trims before it writes: older than 30 days,
    // then all but the newest 2.
    let second = shared(cluster, "history", None);
    assert_ne!(second.replica(), first.replica());
    let sink = Postgres::start(second.clone(), Retention { days: 30, rows: 2 }).unwrap();
    let r4 = call("four", now_ms(), true);
    sink.record(r4.clone());
    flush(&sink);
    drop(sink);
    assert_eq!(history(&reader).await, [r4, r3, r2]);
}
