//! payorch's database connection: diesel's queries over one tokio-postgres session, each
//! statement sent either as a statement prepared once per connection or as an unnamed one.
//!
//! diesel-async's own `AsyncPgConnection` prepares every statement under a name (`s10`) and
//! runs it later by that name. Behind a pooler in transaction mode (PgBouncer before 1.21, or
//! any version without `max_prepared_statements`) the next transaction may run on another
//! server session, where `s10` does not exist, and even the prepare and its first run may
//! land on two sessions. [`Statements::Unnamed`] sends each statement as Parse, Bind,
//! Execute and Sync in one message: the unnamed statement lives only until the next Parse, on
//! whichever session ran it, and the statement costs one round trip, as a cached one does.
//! Its price is the planning, done afresh each run (docs/operations/pooler.md).
//!
//! Directly on PostgreSQL, [`Statements::Prepared`] keeps what diesel-async kept: each
//! statement diesel marks safe to cache is prepared once per connection, typed by its binds,
//! and then run by name. A statement diesel marks unsafe to cache (an `IN` list of varying
//! length, `sql_query`) goes unnamed in both modes: one round trip, where a prepare of its own
//! would cost two and a Close.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::future::Future;
use std::num::NonZeroU32;

use bytes::BytesMut;
use diesel::connection::{CacheSize, Instrumentation, InstrumentationEvent};
use diesel::pg::{
    FailedToLookupTypeError, Pg, PgMetadataCacheKey, PgMetadataLookup, PgQueryBuilder,
    PgTypeMetadata, PgValue, TypeOidLookup,
};
use diesel::query_builder::bind_collector::RawBytesBindCollector;
use diesel::query_builder::{AsQuery, QueryBuilder, QueryFragment, QueryId};
use diesel::result::{DatabaseErrorInformation, DatabaseErrorKind, Error};
use diesel::row::{Field, PartialRow, RowIndex, RowSealed};
use diesel::{ConnectionError, ConnectionResult, QueryResult};
use diesel_async::pooled_connection::PoolableConnection;
use diesel_async::{
    AnsiTransactionManager, AsyncConnection, AsyncConnectionCore, SimpleAsyncConnection,
    TransactionManager,
};
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::{FutureExt, StreamExt, TryStreamExt};
use tokio_postgres::error::{ErrorPosition, SqlState};
use tokio_postgres::types::{FromSql, IsNull, Kind, ToSql, Type};
use tokio_postgres::{Client, Config, RowStream, Statement};

use super::url::DatabaseUrl;

/// How a connection sends its statements.
pub enum Statements {
    /// Prepared once per connection and run by name: PostgreSQL directly, or a pooler that
    /// keeps prepared statements per client (PgBouncer 1.21 on with `max_prepared_statements`,
    /// or session mode).
    Prepared(HashMap<(String, Vec<u32>), Statement>),
    /// Every statement unnamed, one round trip; every transaction opened with `begin`, which
    /// sets what must hold for the transaction (`SET LOCAL statement_timeout`): behind a
    /// pooler in transaction mode nothing set on a session outlives its transaction.
    Unnamed { begin: String },
}

impl Statements {
    /// Prepared once per connection, none yet.
    pub fn prepared() -> Self {
        Statements::Prepared(HashMap::new())
    }
}

/// One database session (see the module's comment).
pub struct PgConn {
    client: Client,
    statements: Statements,
    /// Whether safe-to-cache statements are kept (`set_prepared_statement_cache_size`).
    cache: bool,
    transaction: AnsiTransactionManager,
    instrumentation: Box<dyn Instrumentation>,
}

/// Nobody listens: payorch traces its statements with its own spans (`db::statement::span`).
struct Unobserved;

impl Instrumentation for Unobserved {
    fn on_connection_event(&mut self, _: InstrumentationEvent<'_>) {}
}

impl PgConn {
    /// A session over `client`, whose `connection` is driven by a task of the current runtime
    /// until the client is dropped.
    pub fn new<C>(client: Client, connection: C, statements: Statements) -> Self
    where
        C: Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static,
    {
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::info!(error = %err, "database session ended");
            }
        });
        PgConn {
            client,
            statements,
            cache: true,
            transaction: AnsiTransactionManager::default(),
            instrumentation: Box::new(Unobserved),
        }
    }

    /// A session as the URL says, its statements prepared once each (PostgreSQL itself,
    /// never a transaction pooler: docs/operations/pooler.md).
    pub async fn connect(url: &DatabaseUrl) -> ConnectionResult<Self> {
        Self::open(url, url.config(), Statements::prepared()).await
    }

    /// A session with `config` (the URL's, changed by the caller), under the URL's TLS,
    /// sending its statements as `statements` says.
    pub async fn open(
        url: &DatabaseUrl,
        config: &Config,
        statements: Statements,
    ) -> ConnectionResult<Self> {
        let (client, connection) = url
            .connect_client(config)
            .await
            .map_err(|err| ConnectionError::BadConnection(err.to_string()))?;
        let mut conn = PgConn::new(client, connection, statements);
        // payorch's SQL reckons days and months in UTC, whatever the server's own zone. Behind
        // a transaction pooler a session setting would not last: there each transaction sets
        // it (`Pooler::statements`), and `serve` refuses a server whose own zone is not UTC.
        if let Statements::Prepared(_) = conn.statements {
            conn.batch_execute("SET TIME ZONE 'UTC'")
                .await
                .map_err(ConnectionError::CouldntSetupConfiguration)?;
        }
        Ok(conn)
    }

    /// The rows of `built`, streamed.
    async fn rows(&mut self, built: Built) -> QueryResult<RowStream> {
        let result = self.send(built).await.map_err(database_error);
        self.mark_failed_transaction(result)
    }

    /// A serialization failure marks the transaction for rollback, as diesel's own
    /// connections do (for a load, one met before the first row; an execute reads them all).
    fn mark_failed_transaction<T>(&mut self, result: QueryResult<T>) -> QueryResult<T> {
        if let Err(Error::DatabaseError(DatabaseErrorKind::SerializationFailure, _)) = &result {
            AnsiTransactionManager::transaction_manager_status_mut(self)
                .set_requires_rollback_maybe_up_to_top_level(true);
        }
        result
    }

    async fn send(&mut self, built: Built) -> Result<RowStream, tokio_postgres::Error> {
        let Built {
            sql,
            types,
            binds,
            cacheable,
        } = built;
        let cache = match &mut self.statements {
            Statements::Prepared(cache) if cacheable && self.cache => cache,
            _ => {
                let params = binds.into_iter().zip(types.iter().map(type_of));
                return self.client.query_typed_raw(&sql, params).await;
            }
        };
        let key = (sql, types);
        let statement = match cache.get(&key) {
            Some(statement) => statement.clone(),
            None => {
                let types: Vec<Type> = key.1.iter().map(type_of).collect();
                let statement = self.client.prepare_typed(&key.0, &types).await?;
                cache.insert(key, statement.clone());
                statement
            }
        };
        self.client.query_raw(&statement, binds).await
    }
}

/// A statement taken apart before it is sent: its text, its binds and their types.
struct Built {
    sql: String,
    types: Vec<u32>,
    binds: Vec<Bind>,
    cacheable: bool,
}

impl Built {
    fn of<T: QueryFragment<Pg> + QueryId>(query: &T) -> QueryResult<Built> {
        let mut builder = PgQueryBuilder::default();
        query.to_sql(&mut builder, &Pg)?;
        let mut collector = RawBytesBindCollector::<Pg>::new();
        query.collect_binds(&mut collector, &mut NoCustomTypes, &Pg)?;
        let types = collector
            .metadata
            .iter()
            .map(|meta| {
                meta.oid()
                    .map_err(|err| Error::SerializationError(Box::new(err)))
            })
            .collect::<QueryResult<Vec<u32>>>()?;
        Ok(Built {
            sql: builder.finish(),
            types,
            binds: collector.binds.into_iter().map(Bind).collect(),
            cacheable: query.is_safe_to_cache_prepared(&Pg)?,
        })
    }
}

/// The type of a bind, by OID: every type payorch binds is built in (its enums are domains
/// over `text`, docs/DESIGN.md, "Writing SQL").
fn type_of(oid: &u32) -> Type {
    Type::from_oid(*oid)
        .unwrap_or_else(|| Type::new(format!("oid {oid}"), *oid, Kind::Simple, "public".into()))
}

/// payorch's schema has no type of its own that a bind would need looked up; one that did
/// would fail here, at the statement that binds it, rather than as a wrong OID at the server.
struct NoCustomTypes;

impl PgMetadataLookup for NoCustomTypes {
    fn lookup_type(&mut self, type_name: &str, schema: Option<&str>) -> PgTypeMetadata {
        let key = PgMetadataCacheKey::new(schema.map(Into::into), type_name.into());
        PgTypeMetadata::from_result(Err(FailedToLookupTypeError::new(key.into_owned())))
    }
}

/// A bind as diesel serialized it: sent as it is.
#[derive(Debug)]
struct Bind(Option<Vec<u8>>);

impl ToSql for Bind {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match &self.0 {
            Some(bytes) => {
                out.extend_from_slice(bytes);
                Ok(IsNull::No)
            }
            None => Ok(IsNull::Yes),
        }
    }

    /// The statement was typed by these binds' own types.
    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

/// One row of an answer.
pub struct PgRow(tokio_postgres::Row);

impl RowSealed for PgRow {}

impl<'a> diesel::row::Row<'a, Pg> for PgRow {
    type InnerPartialRow = Self;
    type Field<'f>
        = PgField<'f>
    where
        Self: 'f,
        'a: 'f;

    fn field_count(&self) -> usize {
        self.0.len()
    }

    fn get<'f, I>(&'f self, idx: I) -> Option<Self::Field<'f>>
    where
        'a: 'f,
        Self: RowIndex<I>,
    {
        let idx = self.idx(idx)?;
        let oid = NonZeroU32::new(self.0.columns()[idx].type_().oid())?;
        Some(PgField {
            row: &self.0,
            idx,
            oid: Oid(oid),
        })
    }

    fn partial_row(&self, range: std::ops::Range<usize>) -> PartialRow<'_, Self> {
        PartialRow::new(self, range)
    }
}

impl RowIndex<usize> for PgRow {
    fn idx(&self, idx: usize) -> Option<usize> {
        (idx < self.0.len()).then_some(idx)
    }
}

impl<'n> RowIndex<&'n str> for PgRow {
    fn idx(&self, name: &'n str) -> Option<usize> {
        self.0.columns().iter().position(|c| c.name() == name)
    }
}

/// One value of a row, with its column's type for diesel to read it by.
pub struct PgField<'r> {
    row: &'r tokio_postgres::Row,
    idx: usize,
    oid: Oid,
}

struct Oid(NonZeroU32);

impl TypeOidLookup for Oid {
    fn lookup(&self) -> NonZeroU32 {
        self.0
    }
}

impl<'r> Field<'r, Pg> for PgField<'r> {
    fn field_name(&self) -> Option<&str> {
        Some(self.row.columns()[self.idx].name())
    }

    fn value(&self) -> Option<PgValue<'_>> {
        let Raw(bytes) = self.row.try_get(self.idx).ok()?;
        bytes.map(|bytes| PgValue::new(bytes, &self.oid))
    }
}

/// A value's bytes as the server sent them, whatever its type: diesel reads them.
struct Raw<'a>(Option<&'a [u8]>);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        Ok(Raw(Some(raw)))
    }

    fn from_sql_null(_: &Type) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        Ok(Raw(None))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// A tokio-postgres error as diesel's: a server's error with its kind (what payorch's code
/// matches: unique and check violations, serialization failures, read-only standbys, a closed
/// session) and its constraint; anything else, a session that could not send.
pub fn database_error(err: tokio_postgres::Error) -> Error {
    let Some(db) = err.as_db_error().cloned() else {
        return Error::DatabaseError(
            DatabaseErrorKind::UnableToSendCommand,
            Box::new(err.to_string()),
        );
    };
    let code = db.code();
    let kind = match *code {
        // The session is gone or going: a server shutting down or crashed, a pooler that lost
        // its server (PgBouncer reports its own failures as 08P01). The request is answered
        // `503`, and its client retries under the same key.
        _ if code.code().starts_with("08") => DatabaseErrorKind::ClosedConnection,
        SqlState::ADMIN_SHUTDOWN | SqlState::CRASH_SHUTDOWN | SqlState::CANNOT_CONNECT_NOW => {
            DatabaseErrorKind::ClosedConnection
        }
        SqlState::UNIQUE_VIOLATION => DatabaseErrorKind::UniqueViolation,
        SqlState::FOREIGN_KEY_VIOLATION => DatabaseErrorKind::ForeignKeyViolation,
        SqlState::RESTRICT_VIOLATION => DatabaseErrorKind::RestrictViolation,
        SqlState::EXCLUSION_VIOLATION => DatabaseErrorKind::ExclusionViolation,
        SqlState::T_R_SERIALIZATION_FAILURE => DatabaseErrorKind::SerializationFailure,
        SqlState::READ_ONLY_SQL_TRANSACTION => DatabaseErrorKind::ReadOnlyTransaction,
        SqlState::NOT_NULL_VIOLATION => DatabaseErrorKind::NotNullViolation,
        SqlState::CHECK_VIOLATION => DatabaseErrorKind::CheckViolation,
        _ => DatabaseErrorKind::Unknown,
    };
    Error::DatabaseError(kind, Box::new(ServerError(db)))
}

struct ServerError(tokio_postgres::error::DbError);

impl DatabaseErrorInformation for ServerError {
    fn message(&self) -> &str {
        self.0.message()
    }

    fn details(&self) -> Option<&str> {
        self.0.detail()
    }

    fn hint(&self) -> Option<&str> {
        self.0.hint()
    }

    fn table_name(&self) -> Option<&str> {
        self.0.table()
    }

    fn column_name(&self) -> Option<&str> {
        self.0.column()
    }

    fn constraint_name(&self) -> Option<&str> {
        self.0.constraint()
    }

    fn statement_position(&self) -> Option<i32> {
        match self.0.position()? {
            ErrorPosition::Original(at) | ErrorPosition::Internal { position: at, .. } => {
                i32::try_from(*at).ok()
            }
        }
    }
}

impl SimpleAsyncConnection for PgConn {
    /// diesel's transaction manager opens every outermost transaction with exactly `BEGIN`;
    /// behind a transaction pooler the transaction's settings ride in the same round trip.
    async fn batch_execute(&mut self, query: &str) -> QueryResult<()> {
        let query = match &self.statements {
            Statements::Unnamed { begin } if query == "BEGIN" => begin.as_str(),
            _ => query,
        };
        self.client
            .batch_execute(query)
            .await
            .map_err(database_error)
    }
}

impl AsyncConnectionCore for PgConn {
    type ExecuteFuture<'conn, 'query> = BoxFuture<'conn, QueryResult<usize>>;
    type LoadFuture<'conn, 'query> = BoxFuture<'conn, QueryResult<Self::Stream<'conn, 'query>>>;
    type Stream<'conn, 'query> = BoxStream<'static, QueryResult<PgRow>>;
    type Row<'conn, 'query> = PgRow;
    type Backend = Pg;

    fn load<'conn, 'query, T>(&'conn mut self, source: T) -> Self::LoadFuture<'conn, 'query>
    where
        T: AsQuery + 'query,
        T::Query: QueryFragment<Pg> + QueryId + 'query,
    {
        // Taken apart here, before the future: the query itself need not be `Send`.
        let built = Built::of(&source.as_query());
        async move {
            let rows = self.rows(built?).await?;
            Ok(rows.map_ok(PgRow).map_err(database_error).boxed())
        }
        .boxed()
    }

    fn execute_returning_count<'conn, 'query, T>(
        &'conn mut self,
        source: T,
    ) -> Self::ExecuteFuture<'conn, 'query>
    where
        T: QueryFragment<Pg> + QueryId + 'query,
    {
        let built = Built::of(&source);
        async move {
            let mut rows = Box::pin(self.rows(built?).await?);
            // Read to the end of the answer (its ReadyForQuery): `db::one` says why.
            let mut failed = None;
            while let Some(row) = rows.next().await {
                if let Err(err) = row {
                    failed = Some(database_error(err));
                    break;
                }
            }
            let result = match failed {
                Some(err) => Err(err),
                None => Ok(rows.rows_affected().unwrap_or(0) as usize),
            };
            self.mark_failed_transaction(result)
        }
        .boxed()
    }
}

impl AsyncConnection for PgConn {
    type TransactionManager = AnsiTransactionManager;

    async fn establish(database_url: &str) -> ConnectionResult<Self> {
        let url =
            DatabaseUrl::parse(database_url).map_err(ConnectionError::InvalidConnectionUrl)?;
        Self::connect(&url).await
    }

    fn transaction_state(&mut self) -> &mut AnsiTransactionManager {
        &mut self.transaction
    }

    fn instrumentation(&mut self) -> &mut dyn Instrumentation {
        &mut *self.instrumentation
    }

    fn set_instrumentation(&mut self, instrumentation: impl Instrumentation) {
        self.instrumentation = Box::new(instrumentation);
    }

    fn set_prepared_statement_cache_size(&mut self, size: CacheSize) {
        self.cache = matches!(size, CacheSize::Unbounded);
        if let (false, Statements::Prepared(cache)) = (self.cache, &mut self.statements) {
            cache.clear();
        }
    }
}

impl PoolableConnection for PgConn {
    /// A session the server or the network closed, or a transaction dropped halfway.
    fn is_broken(&mut self) -> bool {
        self.client.is_closed() || AnsiTransactionManager::is_broken_transaction_manager(self)
    }
}
