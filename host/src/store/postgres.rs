//! [`Postgres`]: one pooled connection to the shared database, usable from
//! synchronous code on any thread.
//!
//! The stores above are synchronous (the embedded ones do blocking file and
//! SQLite I/O), so the pool runs on a small tokio runtime of its own: a call
//! hands its statement to that runtime and waits for the answer. That works
//! from plain threads, `spawn_blocking` and async tasks alike, and never
//! nests runtimes.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool_postgres::{Hook, Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use super::error::{StoreError, describe};
use super::schema;

/// How long opening one connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a call waits for a free pooled connection.
const POOL_WAIT: Duration = Duration::from_secs(30);

/// The shared PostgreSQL database (cheap to clone behind its `Arc`).
pub struct Postgres {
    /// `Some` until dropped: a runtime may not be dropped inside async code,
    /// so `Drop` shuts it down in the background instead.
    runtime: Option<tokio::runtime::Runtime>,
    pool: Pool,
    server: String,
    /// Connections taken from the pool so far.
    round_trips: Arc<AtomicU64>,
}

impl Postgres {
    /// Connects to the database at `url` with at most `pool_size`
    /// connections, checks that it answers, and creates or migrates the
    /// ctxbox schema. A bad URL, an unreachable server, a refused login or a
    /// schema from a newer ctxbox is an error saying so.
    pub fn connect(url: &str, pool_size: usize) -> Result<Arc<Self>, StoreError> {
        let mut config: tokio_postgres::Config =
            url.parse()
                .map_err(|error: tokio_postgres::Error| StoreError::BadUrl {
                    url: mask_password(url),
                    reason: describe(&error),
                })?;
        if config.get_hosts().is_empty() {
            return Err(StoreError::BadUrl {
                url: mask_password(url),
                reason: "it names no host".to_owned(),
            });
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("ctxbox");
        }
        let server = describe_server(&config);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ctxbox-postgres")
            .enable_all()
            .build()
            .map_err(|error| StoreError::Unreachable {
                server: server.clone(),
                reason: format!("cannot start the client's runtime: {error}"),
            })?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let round_trips = Arc::new(AtomicU64::new(0));
        let counted = |round_trips: &Arc<AtomicU64>| {
            let round_trips = round_trips.clone();
            Hook::sync_fn(move |_, _| {
                round_trips.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
        };
        let pool = Pool::builder(manager)
            .post_create(counted(&round_trips))
            .post_recycle(counted(&round_trips))
            .max_size(pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(CONNECT_TIMEOUT * 2))
            .build()
            .map_err(|error| StoreError::Config(format!("connection pool: {error}")))?;
        let postgres = Arc::new(Self {
            runtime: Some(runtime),
            pool,
            server,
            round_trips,
        });
        let server = postgres.server.clone();
        postgres.run(move |client| async move { schema::migrate(&client, &server).await })?;
        Ok(postgres)
    }

    /// How many times a connection was taken from the pool: each statement
    /// or transaction the stores sent, lease renewals and releases included.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// Host and port, database and user, for messages.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Runs `work` with a pooled connection on the client's runtime and
    /// waits for its answer. Errors of type `E` come from `work`; failing
    /// to get a connection is turned into one through `From<StoreError>`.
    pub fn run<T, E, F, Fut>(&self, work: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(Object) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        let work = self.with_client(work);
        self.handle().spawn(async move {
            let _ = answer.send(work.await);
        });
        answered
            .recv()
            .unwrap_or_else(|_| Err(E::from(self.stopped())))
    }

    /// [`Self::run`] for async callers: awaits the answer instead of
    /// blocking the thread.
    pub async fn run_async<T, E, F, Fut>(&self, work: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(Object) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        let task = self.handle().spawn(self.with_client(work));
        task.await.unwrap_or_else(|_| Err(E::from(self.stopped())))
    }

    /// `work` run with a pooled connection.
    fn with_client<T, E, F, Fut>(
        &self,
        work: F,
    ) -> impl Future<Output = Result<T, E>> + Send + 'static
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(Object) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        let pool = self.pool.clone();
        let server = self.server.clone();
        async move {
            match pool.get().await {
                Ok(client) => work(client).await,
                Err(error) => Err(E::from(StoreError::Unreachable {
                    server,
                    reason: pool_error(&error),
                })),
            }
        }
    }

    fn stopped(&self) -> StoreError {
        StoreError::Unreachable {
            server: self.server.clone(),
            reason: "the client's runtime stopped".to_owned(),
        }
    }

    /// Runs `work` in the background on the client's runtime, without
    /// waiting (releasing a lease on drop, renewing it while held).
    pub(crate) fn spawn<F>(&self, work: F) -> tokio::task::JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.handle().spawn(work)
    }

    /// The pool, for background work on the client's runtime.
    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A failed statement as a [`StoreError`] saying what it was for.
    pub fn query_error(&self, what: &'static str, error: &tokio_postgres::Error) -> StoreError {
        StoreError::Query {
            server: self.server.clone(),
            what,
            reason: describe(error),
        }
    }

    fn handle(&self) -> &tokio::runtime::Handle {
        self.runtime
            .as_ref()
            .map(tokio::runtime::Runtime::handle)
            .expect("the runtime lives until drop")
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

fn pool_error(error: &deadpool_postgres::PoolError) -> String {
    match error {
        deadpool_postgres::PoolError::Backend(error) => describe(error),
        other => other.to_string(),
    }
}

/// `host:port/db as user` (or the socket directory), never the password.
fn describe_server(config: &tokio_postgres::Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(index, host)| {
            let port = config
                .get_ports()
                .get(index)
                .or(config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            match host {
                tokio_postgres::config::Host::Tcp(name) => format!("{name}:{port}"),
                #[cfg(unix)]
                tokio_postgres::config::Host::Unix(dir) => format!("{}:{port}", dir.display()),
            }
        })
        .collect();
    format!(
        "{}/{} as {}",
        hosts.join(","),
        config.get_dbname().unwrap_or("(default database)"),
        config.get_user().unwrap_or("(default user)")
    )
}

/// `url` with the password, if it has one, replaced by `***`.
fn mask_password(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://")
        && let Some((credentials, host)) = rest.split_once('@')
        && let Some((user, _)) = credentials.split_once(':')
    {
        return format!("{scheme}://{user}:***@{host}");
    }
    let mut masked: Vec<String> = Vec::new();
    for part in url.split_whitespace() {
        match part.split_once('=') {
            Some(("password", _)) => masked.push("password=***".to_owned()),
            _ => masked.push(part.to_owned()),
        }
    }
    masked.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            mask_password("postgres://ctx:secret@db:5432/ctxbox"),
            "postgres://ctx:***@db:5432/ctxbox"
        );
        assert_eq!(
            mask_password("host=db password=secret"),
            "host=db password=***"
        );
    }

    #[test]
    fn a_bad_url_is_named() {
        let error = Postgres::connect("postgres://ctx:secret@db:notaport/x", 1).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("is not a PostgreSQL URL"), "{text}");
        assert!(!text.contains("secret"), "{text}");
    }

    #[test]
    fn an_unreachable_server_is_an_error_naming_it() {
        // Port 1 on loopback: nothing listens there.
        let error = Postgres::connect("postgres://ctx@127.0.0.1:1/ctxbox", 1).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("cannot reach PostgreSQL at 127.0.0.1:1/ctxbox"),
            "{text}"
        );
    }
}
