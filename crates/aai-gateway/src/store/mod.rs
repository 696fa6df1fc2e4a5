//! The shared store: PostgreSQL for a team's replicas (config `store`, docs/storage.md).
//!
//! One [`Shared`] per process: a connection pool (`deadpool-postgres` over `tokio-postgres`,
//! TLS through rustls with the ring provider unless `sslmode=disable`), the credential key
//! (`crypt`), this process's replica id, and bounded waits: every connection, pooled
//! connection and statement has a deadline, so a store that is down gives an error, never a
//! hang. Versioned migrations run at start (`migrate`). What each subsystem keeps here is
//! its own: consent grants and pending calls (`consent/shared.rs`), history (`history.rs`),
//! credentials (`auth/store.rs`); they reach the database only through this module's
//! handles. A notification listener on a connection of its own ([`Shared::listen`]) tells
//! the consent gate of changes other replicas make.
//!
//! Nothing here shows the URL's password: every message names the store by its redacted
//! URL, and the driver's words are scrubbed of the password.

mod buckets;
pub(crate) mod crypt;
pub(crate) mod migrate;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use tokio_postgres::config::SslMode;

use crate::config::StoreSettings;
use crate::error::{Code, GatewayError};

/// Why the shared store could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No key for credentials.
    #[error(
        "the PostgreSQL store needs a key to encrypt credentials: set {} (32 random bytes as 64 hex digits or base64, e.g. from `openssl rand -hex 32`) or name a file holding it in `store.keyFile`",
        crypt::KEY_VAR
    )]
    NoKey,
    /// The key is not one.
    #[error("the store key in {from} {why}")]
    BadKey {
        /// `AAI_STORE_KEY` or the file.
        from: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The key file cannot be read.
    #[error("cannot read the store key file {}: {why}", .path.display())]
    KeyFile {
        /// The file.
        path: std::path::PathBuf,
        /// The OS's words.
        why: std::io::Error,
    },
    /// A credential was sealed with another key.
    #[error(
        "the stored credential `{account}` was encrypted with another key (key id {stored}; this gateway's key is {ours}): every replica needs the same AAI_STORE_KEY or store.keyFile"
    )]
    WrongKey {
        /// App id (and name).
        account: String,
        /// The id stored with it.
        stored: String,
        /// This key's id.
        ours: String,
    },
    /// A credential does not open with this key for this account.
    #[error(
        "the stored credential `{0}` cannot be decrypted: it was changed, moved from another row, or encrypted with another key"
    )]
    Decrypt(String),
    /// The database cannot be reached (or refused us).
    #[error("the PostgreSQL store {at} is not usable: {why}")]
    Unavailable {
        /// The redacted URL.
        at: String,
        /// The driver's words, scrubbed.
        why: String,
    },
    /// It did not answer in time.
    #[error("the PostgreSQL store {at} did not answer within {} s", .secs)]
    Timeout {
        /// The redacted URL.
        at: String,
        /// The deadline.
        secs: u64,
    },
    /// A statement failed.
    #[error("the PostgreSQL store {at} failed: {why}")]
    Query {
        /// The redacted URL.
        at: String,
        /// The database's words, scrubbed.
        why: String,
    },
    /// The database was migrated by a newer gateway.
    #[error(
        "the PostgreSQL store {at} has schema version {found}, newer than this gateway knows ({known}): upgrade this gateway, or point it at another database"
    )]
    Newer {
        /// The redacted URL.
        at: String,
        /// Its version.
        found: i64,
        /// Ours.
        known: i64,
    },
    /// TLS could not be set up.
    #[error("cannot set up TLS for the PostgreSQL store: {0}")]
    Tls(String),
}

impl From<Error> for GatewayError {
    fn from(e: Error) -> GatewayError {
        let code = match e {
            Error::Unavailable { .. } | Error::Timeout { .. } => Code::ServiceUnavailable,
            _ => Code::AutomationFailed,
        };
        let hint = matches!(e, Error::Unavailable { .. } | Error::Timeout { .. })
            .then_some("The gateway's shared store (PostgreSQL) is down or unreachable; try again when it is back.");
        let wire = GatewayError::new(code, e.to_string());
        match hint {
            Some(h) => wire.with_hint(h),
            None => wire,
        }
    }
}

/// The channel every replica listens on.
pub(crate) const CHANNEL: &str = "aai_gateway";

/// What the notification listener reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Listening (again): anything may have changed while it was not.
    Up,
    /// The listening connection is gone: poll until it is back.
    Down,
    /// A notification's payload.
    Message(String),
}

/// The shared store of this process.
#[derive(Debug)]
pub struct Shared {
    at: String,
    password: Option<String>,
    pg: tokio_postgres::Config,
    tls: Tls,
    pool: deadpool_postgres::Pool,
    /// `None` for commands that never touch credentials (`consent`, `history`).
    key: Option<crypt::Key>,
    replica: String,
    timeout: Duration,
    connect_timeout: Duration,
}

#[derive(Clone)]
enum Tls {
    Off,
    Rustls(tokio_postgres_rustls::MakeRustlsConnect),
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Tls::Off => "Tls::Off",
            Tls::Rustls(_) => "Tls::Rustls",
        })
    }
}

impl Shared {
    /// The store `settings` describe, with the key from `store.keyFile` or
    /// `AAI_STORE_KEY` (`env`). Connects nothing yet: [`Shared::migrate`] does, at start.
    pub fn new(
        settings: &StoreSettings,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Arc<Shared>, Error> {
        let key = crypt::Key::load(settings.key_file.as_deref(), env)?;
        Shared::with_key(settings, Some(key))
    }

    /// The store without the credential key, for commands that read and write grants and
    /// history only.
    pub fn without_key(settings: &StoreSettings) -> Result<Arc<Shared>, Error> {
        Shared::with_key(settings, None)
    }

    fn with_key(settings: &StoreSettings, key: Option<crypt::Key>) -> Result<Arc<Shared>, Error> {
        let at = settings.shown();
        let mut pg: tokio_postgres::Config =
            settings
                .url
                .parse()
                .map_err(|e: tokio_postgres::Error| Error::Unavailable {
                    at: at.clone(),
                    why: e.to_string(),
                })?;
        pg.connect_timeout(settings.connect_timeout);
        pg.keepalives_idle(Duration::from_secs(30));
        if pg.get_application_name().is_none() {
            pg.application_name("aai-gateway");
        }
        let password = pg
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        let tls = if pg.get_ssl_mode() == SslMode::Disable {
            Tls::Off
        } else {
            crate::net::install_crypto();
            use rustls_platform_verifier::ConfigVerifierExt as _;
            let config = rustls::ClientConfig::with_platform_verifier()
                .map_err(|e| Error::Tls(e.to_string()))?;
            Tls::Rustls(tokio_postgres_rustls::MakeRustlsConnect::new(config))
        };
        let manager_config = deadpool_postgres::ManagerConfig {
            recycling_method: deadpool_postgres::RecyclingMethod::Fast,
        };
        let manager = match &tls {
            Tls::Off => deadpool_postgres::Manager::from_config(
                pg.clone(),
                tokio_postgres::NoTls,
                manager_config,
            ),
            Tls::Rustls(t) => {
                deadpool_postgres::Manager::from_config(pg.clone(), t.clone(), manager_config)
            }
        };
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(settings.pool_size)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(settings.timeout))
            .create_timeout(Some(settings.connect_timeout))
            .recycle_timeout(Some(settings.timeout))
            .build()
            .map_err(|e| Error::Unavailable {
                at: at.clone(),
                why: e.to_string(),
            })?;
        let mut id = [0u8; 6];
        getrandom::fill(&mut id).expect("the OS has randomness");
        let replica = crate::text::hex(&id);
        Ok(Arc::new(Shared {
            at,
            password,
            pg,
            tls,
            pool,
            key,
            replica,
            timeout: settings.timeout,
            connect_timeout: settings.connect_timeout,
        }))
    }

    /// The redacted URL.
    pub fn shown(&self) -> &str {
        &self.at
    }

    /// This process's id among the replicas (random per start).
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// The credential key.
    pub fn key(&self) -> Result<&crypt::Key, Error> {
        self.key.as_ref().ok_or(Error::NoKey)
    }

    /// Runs the migrations this database lacks (one transaction, under an advisory lock
    /// that replicas starting together share); refuses a database newer than this binary.
    /// Returns the version the database is at.
    pub async fn migrate(&self) -> Result<i64, Error> {
        let mut client = self.client().await?;
        self.timed(migrate::run(&mut client, &self.at))
            .await
            .and_then(|r| r)
    }

    /// A pooled connection, within the deadline.
    pub async fn client(&self) -> Result<deadpool_postgres::Object, Error> {
        use deadpool_postgres::PoolError;
        match self.pool.get().await {
            Ok(c) => Ok(c),
            Err(PoolError::Timeout(kind)) => Err(Error::Timeout {
                at: self.at.clone(),
                secs: match kind {
                    deadpool_postgres::TimeoutType::Create => self.connect_timeout.as_secs(),
                    _ => self.timeout.as_secs(),
                },
            }),
            Err(PoolError::Backend(e)) => Err(self.unavailable(&e)),
            Err(e) => Err(Error::Unavailable {
                at: self.at.clone(),
                why: self.scrub(&e.to_string()),
            }),
        }
    }

    /// `work` within the statement deadline; the driver's error, scrubbed.
    pub async fn timed<T>(
        &self,
        work: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, Error> {
        match tokio::time::timeout(self.timeout, work).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) if e.as_db_error().is_some() => Err(Error::Query {
                at: self.at.clone(),
                why: self.scrub(&e.to_string()),
            }),
            Ok(Err(e)) => Err(self.unavailable(&e)),
            Err(_) => Err(Error::Timeout {
                at: self.at.clone(),
                secs: self.timeout.as_secs(),
            }),
        }
    }

    /// Tells every replica (this one too) `payload` on [`CHANNEL`].
    pub async fn notify(&self, payload: &str) -> Result<(), Error> {
        let client = self.client().await?;
        self.timed(client.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload]))
            .await
            .map(drop)
    }

    /// Listens on [`CHANNEL`] on a connection of its own until `stop`: payloads and the
    /// listener's state go to `events`. A lost connection is reported and opened again
    /// (after 1 s, then up to 10 s between tries).
    pub fn listen(
        self: &Arc<Self>,
        events: tokio::sync::mpsc::UnboundedSender<Event>,
        stop: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let mut pause = Duration::from_secs(1);
            let mut up = false;
            loop {
                let ended = tokio::select! {
                    () = stop.cancelled() => return,
                    r = me.listen_once(&events, &mut up) => r,
                };
                if events.is_closed() {
                    return;
                }
                match ended {
                    Ok(()) => {}
                    // Said once per outage: the tries that follow fail quietly.
                    Err(e) if !up => tracing::debug!("{e}"),
                    Err(e) => tracing::warn!("{e}; polling until it is back"),
                }
                if up {
                    pause = Duration::from_secs(1);
                }
                up = false;
                let _ = events.send(Event::Down);
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(pause) => {}
                }
                pause = (pause * 2).min(Duration::from_secs(10));
            }
        })
    }

    /// One listening connection, until it ends.
    async fn listen_once(
        &self,
        events: &tokio::sync::mpsc::UnboundedSender<Event>,
        up: &mut bool,
    ) -> Result<(), Error> {
        let (client, mut messages) = match &self.tls {
            Tls::Off => open_listener(&self.pg, tokio_postgres::NoTls).await,
            Tls::Rustls(t) => open_listener(&self.pg, t.clone()).await,
        }
        .map_err(|e| self.unavailable(&e))?;
        self.timed(client.batch_execute(&format!("LISTEN {CHANNEL}")))
            .await?;
        *up = true;
        let _ = events.send(Event::Up);
        while let Some(payload) = messages.recv().await {
            if events.send(Event::Message(payload)).is_err() {
                return Ok(());
            }
        }
        Err(Error::Unavailable {
            at: self.at.clone(),
            why: "the listening connection closed".into(),
        })
    }

    fn unavailable(&self, e: &tokio_postgres::Error) -> Error {
        // The driver's top line says little ("error connecting to server"): its cause too.
        let mut why = e.to_string();
        if let Some(source) = std::error::Error::source(e) {
            let source = source.to_string();
            if !why.contains(&source) {
                why = format!("{why}: {source}");
            }
        }
        Error::Unavailable {
            at: self.at.clone(),
            why: self.scrub(&why),
        }
    }

    fn scrub(&self, text: &str) -> String {
        let forms: Vec<String> = self.password.iter().cloned().collect();
        crate::text::scrub(text, &forms)
    }
}

/// A connection that only listens: its notifications, as payloads, until it closes.
async fn open_listener<T>(
    pg: &tokio_postgres::Config,
    tls: T,
) -> Result<
    (
        tokio_postgres::Client,
        tokio::sync::mpsc::UnboundedReceiver<String>,
    ),
    tokio_postgres::Error,
>
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket>,
    T::Stream: Send + 'static,
{
    let (client, mut connection) = pg.connect(tls).await?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = stream.next().await {
            match message {
                Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                    if tx.send(n.payload().to_owned()).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    Ok((client, rx))
}
