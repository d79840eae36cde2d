//! What each operation of a function does to the outside world (SQL, ORM, Redis, broker,
//! HTTP), which transaction it runs in, and which values come from the event. Every check
//! reads a [`FnFacts`].

use std::collections::{HashMap, HashSet};

use crate::ir::{Call, Expr, Function, OpKind};
use crate::lang::jvm_vocab;
use crate::schema::Schema;
use crate::sql::{self, SqlStmt};
use crate::words::{has_any, norm, table_key};

/// What an operation does.
#[derive(Debug, Clone)]
pub(crate) enum Act {
    /// An SQL statement in a string argument.
    Sql(SqlStmt),
    /// An ORM or repository create. `safe`: a conflict-handling form (upsert, get-or-create,
    /// `onConflict`, `ignore_conflicts`).
    OrmCreate {
        target: String,
        columns: Option<Vec<String>>,
        safe: bool,
    },
    /// An ORM update: the columns it sets, whether any is relative (`increment`, `$inc`,
    /// `F("x") + 1`, `gorm.Expr("x - ?")`), whether its filter compares an ordering column.
    OrmUpdate {
        target: String,
        sets: Vec<String>,
        relative: bool,
        ordered: bool,
    },
    /// An ORM look-up of one row.
    OrmRead { target: String },
    /// A Redis read: GET, EXISTS, SISMEMBER, HGET, HEXISTS.
    RedisRead { key: String },
    /// A Redis write: SET (with or without NX), SETNX, HSET, SADD.
    RedisWrite { key: String, nx: bool },
    /// INCR, INCRBY, DECRBY, HINCRBY, ZINCRBY.
    RedisIncr,
    /// A message to a broker or job queue.
    Publish,
    /// An HTTP request that creates something (POST/PUT/PATCH), or a provider SDK create.
    HttpCreate,
    /// `commit()` on a session, connection or transaction.
    Commit,
    /// A transaction opened on a variable (`tx := db.BeginTx(…)`).
    Begin,
    /// Anything else.
    Other,
}

impl Act {
    /// Names its table or key as written: an inlined helper's renamed local (`Receipt'2`, see
    /// `calls`) loses its suffix.
    fn drop_renames(&mut self) {
        let strip = |s: &mut String| {
            if let Some(at) = s.find('\'') {
                let tail = &s[at + 1..];
                let digits = tail.chars().take_while(char::is_ascii_digit).count();
                if digits > 0 {
                    s.replace_range(at..at + 1 + digits, "");
                }
            }
        };
        match self {
            Act::OrmCreate { target, .. }
            | Act::OrmUpdate { target, .. }
            | Act::OrmRead { target } => strip(target),
            Act::RedisRead { key } | Act::RedisWrite { key, .. } => strip(key),
            _ => {}
        }
    }

    /// A write to a database (SQL or ORM).
    pub(crate) fn is_db_write(&self) -> bool {
        match self {
            Act::Sql(s) => s.is_write(),
            Act::OrmCreate { .. } | Act::OrmUpdate { .. } => true,
            _ => false,
        }
    }

    /// The table or model it writes or reads, if any.
    pub(crate) fn target(&self) -> Option<&str> {
        match self {
            Act::Sql(SqlStmt::Insert { table, .. })
            | Act::Sql(SqlStmt::Update { table, .. })
            | Act::Sql(SqlStmt::Delete { table })
            | Act::Sql(SqlStmt::Merge { table }) => Some(table),
            Act::Sql(SqlStmt::Select { tables, .. }) => tables.first().map(String::as_str),
            Act::OrmCreate { target, .. }
            | Act::OrmUpdate { target, .. }
            | Act::OrmRead { target } => Some(target),
            Act::RedisRead { key } | Act::RedisWrite { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// The facts about one function that checks read.
#[derive(Debug)]
pub(crate) struct FnFacts<'a> {
    pub(crate) func: &'a Function,
    /// One per op.
    pub(crate) acts: Vec<Act>,
    /// The transaction each op runs in (`None`: autocommit).
    pub(crate) tx: Vec<Option<u32>>,
    /// Variables holding values derived from the function's parameters (the event).
    pub(crate) tainted: HashSet<String>,
    /// String constants assigned in the function (SQL kept in a variable).
    pub(crate) strings: HashMap<String, Expr>,
    /// Values assigned to each local (the last assignment before use wins).
    pub(crate) values: HashMap<String, Expr>,
    /// What each inlined helper returns, by the helper's name (the last return wins): a key
    /// built in a helper (`dedupKey(id)` returning `"dedup:event:$id"`).
    pub(crate) returns: HashMap<String, Expr>,
    pub(crate) schema: &'a Schema,
}

/// Payment and messaging providers whose SDK calls reach their HTTP APIs.
const PROVIDERS: &[&str] = &[
    "stripe",
    "paypal",
    "braintree",
    "razorpay",
    "adyen",
    "mollie",
    "paddle",
    "lemonsqueezy",
    "twilio",
    "sendgrid",
    "mailgun",
    "postmark",
    "resend",
    "shopify",
    "clerk",
];

const REDIS_WORDS: &[&str] = &["redis", "rdb", "cache", "valkey", "kv", "upstash"];

impl<'a> FnFacts<'a> {
    pub(crate) fn new(
        func: &'a Function,
        globals: &[(String, Expr)],
        schema: &'a Schema,
        implicit_tx: bool,
    ) -> Self {
        let mut facts = FnFacts {
            func,
            acts: Vec::with_capacity(func.ops.len()),
            tx: Vec::with_capacity(func.ops.len()),
            // Flask's `request` is a global, not a parameter: a route's or handler's request.
            tainted: (func.params.iter().cloned())
                .chain((func.kind != crate::ir::HandlerKind::Other).then(|| "request".to_string()))
                .collect(),
            strings: HashMap::new(),
            values: HashMap::new(),
            returns: HashMap::new(),
            schema,
        };
        // Parameters shadow the file's globals of the same name.
        for (name, value) in globals.iter().filter(|(n, _)| !func.params.contains(n)) {
            if matches!(value, Expr::Str(_) | Expr::Template(_)) {
                facts.strings.insert(name.clone(), value.clone());
            }
            facts.values.insert(name.clone(), value.clone());
        }
        for op in &func.ops {
            let act = match &op.kind {
                OpKind::Call(call) => {
                    facts.taint_decoded(call);
                    let mut act = facts.classify(call);
                    act.drop_renames();
                    act
                }
                OpKind::Assign {
                    targets,
                    value,
                    op: None,
                } => {
                    if facts.mentions_tainted(value) {
                        facts.tainted.extend(targets.iter().map(|t| root_of(t)));
                    }
                    // An alias of a local (`const row = order`) holds the local's value.
                    let value = match value {
                        Expr::Path(p) if p.len() == 1 => facts
                            .values
                            .get(&p[0])
                            .cloned()
                            .unwrap_or_else(|| value.clone()),
                        other => other.clone(),
                    };
                    for t in targets {
                        if matches!(value, Expr::Str(_) | Expr::Template(_)) {
                            facts.strings.insert(t.clone(), value.clone());
                        }
                        facts.values.insert(t.clone(), value.clone());
                    }
                    Act::Other
                }
                OpKind::Return(Some(value)) => {
                    if let Some(o) = &op.origin {
                        facts.returns.insert(o.helper.clone(), value.clone());
                    }
                    Act::Other
                }
                _ => Act::Other,
            };
            facts.acts.push(act);
        }
        facts.release_locks();
        facts.assign_transactions(implicit_tx);
        facts
    }

    /// A `SET NX` whose key the function deletes again (`DEL`, `UNLINK`, in a `finally` or a
    /// `defer`) is a lock held while the work runs, not a marker of the event. A delete only
    /// in a `catch` forgets a marker whose work failed, so that the retry runs it.
    fn release_locks(&mut self) {
        let conds = &self.func.conds;
        let released: Vec<String> = (self.func.ops.iter())
            .filter(|op| !op.conds.iter().any(|&c| conds[c].is_catch))
            .filter_map(|op| match &op.kind {
                OpKind::Call(c)
                    if matches!(c.method().as_str(), "del" | "unlink" | "delete" | "getdel")
                        && self
                            .receiver_words(c)
                            .iter()
                            .any(|r| has_any(r, REDIS_WORDS)) =>
                {
                    Some(self.redis_key(c))
                }
                _ => None,
            })
            .filter(|k| !k.is_empty())
            .collect();
        for act in &mut self.acts {
            if matches!(act, Act::RedisWrite { key, nx: true } if released.contains(key)) {
                *act = Act::Other;
            }
        }
    }

    /// The expression `e` stands for: a local named alone (`updateData`) is the value last
    /// assigned to it (`None` when nothing in the function assigned it); anything else is
    /// itself.
    pub(crate) fn resolved<'e>(&'e self, e: &'e Expr) -> Option<&'e Expr> {
        match e {
            Expr::Path(p) if p.len() == 1 => self.values.get(&p[0]),
            other => Some(other),
        }
    }

    /// `json.Unmarshal(msg.Value, &ev)`, `c.ShouldBindJSON(&evt)`,
    /// `json.NewDecoder(r.Body).Decode(&evt)`: the variables decoded into hold the event.
    fn taint_decoded(&mut self, call: &Call) {
        let m = call.method();
        let decodes = matches!(
            m.as_str(),
            "unmarshal"
                | "decode"
                | "bind"
                | "bindjson"
                | "shouldbindjson"
                | "shouldbind"
                | "shouldbindbodywith"
                | "unmarshaljson"
                | "readjson"
                | "decodejson"
                | "bodyparser"
        );
        if !decodes {
            return;
        }
        let from_event = call.args.iter().any(|a| self.mentions_tainted(a))
            || call
                .callee
                .first()
                .is_some_and(|r| self.tainted.contains(r))
            || call
                .receiver
                .as_ref()
                .is_some_and(|r| r.args.iter().any(|a| self.mentions_tainted(a)));
        if from_event {
            for a in &call.args {
                if let Expr::Path(p) = a
                    && let Some(root) = p.first()
                {
                    self.tainted.insert(root.clone());
                }
            }
        }
    }

    /// Whether an expression uses a value derived from the event.
    pub(crate) fn mentions_tainted(&self, e: &Expr) -> bool {
        let mut found = false;
        e.walk(&mut |x| match x {
            Expr::Path(p)
                if p.first().is_some_and(|r| {
                    self.tainted.contains(r)
                        || r == "this" && p.len() > 2 && self.tainted.contains(&p[1])
                }) =>
            {
                found = true;
            }
            Expr::Call(c)
                if c.callee.first().is_some_and(|r| self.tainted.contains(r))
                    && c.callee.len() > 1 =>
            {
                found = true;
            }
            _ => {}
        });
        found
    }

    /// The text of an SQL argument: a literal, or a variable holding one.
    fn sql_text(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Str(_) | Expr::Template(_) => e.string_text(),
            Expr::Path(p) if p.len() == 1 => self.strings.get(&p[0]).and_then(Expr::string_text),
            Expr::Binary { op, left, right } if op == "+" => {
                Some(self.sql_text(left)? + &self.sql_text(right).unwrap_or_else(|| "?".into()))
            }
            _ => None,
        }
    }

    /// The receiver's words plus the name of what its root variable was made by
    /// (`r = redis.Redis()` makes `r.get` a Redis call).
    pub(crate) fn receiver_words(&self, call: &Call) -> Vec<String> {
        let mut recv = call.receiver_words();
        let root = call.callee.first().map(String::as_str).unwrap_or("");
        let root = if root == "self" || root == "this" {
            call.callee.get(1).map(String::as_str).unwrap_or("")
        } else {
            root
        };
        if call.callee.len() > 1 {
            match self.values.get(root) {
                Some(Expr::Call(made)) => {
                    recv.extend(made.callee.iter().map(|s| s.to_lowercase()));
                }
                // A parameter of an inlined helper bound to the caller's variable
                // (`userDelegate` given `prismaUserDelegate`): the caller's name says more.
                Some(Expr::Path(alias)) if alias.len() == 1 => {
                    recv.push(alias[0].to_lowercase());
                    if let Some(Expr::Call(made)) = self.values.get(&alias[0]) {
                        recv.extend(made.callee.iter().map(|s| s.to_lowercase()));
                    }
                }
                // A field declared with its type (`private final OrderRepository orders;`).
                Some(Expr::Object {
                    type_name: Some(t),
                    fields,
                }) if fields.is_empty() => recv.push(t.to_lowercase()),
                _ => {}
            }
        }
        recv
    }

    fn classify(&self, call: &Call) -> Act {
        let m = call.method();
        // go-redis: `rdb.Exists(ctx, key).Result()` is the inner command.
        if let Some(inner) = &call.receiver
            && matches!(
                m.as_str(),
                "result" | "val" | "err" | "int64" | "int" | "bool" | "bytes" | "uint64"
            )
            && call.args.is_empty()
        {
            return self.classify(inner);
        }
        if let Some(act) = self.drizzle_set(call) {
            return act;
        }
        if let Some(act) = drizzle_select(call) {
            return act;
        }
        if let Some(act) = self.drizzle_insert(call) {
            return act;
        }
        let recv = self.receiver_words(call);
        let recv_text = recv.join(".");
        // SQL in the first string argument (or the first two: `tx.ExecContext(ctx, q)`).
        for arg in call.args.iter().take(2) {
            if let Some(text) = self.sql_text(arg)
                && let Some(stmt) = sql::analyse(&text)
            {
                return Act::Sql(stmt);
            }
        }
        if m == "commit" && !recv.is_empty() {
            return Act::Commit;
        }
        if matches!(
            m.as_str(),
            "begin"
                | "begintx"
                | "beginx"
                | "begintxx"
                | "mustbegin"
                | "starttransaction"
                | "begin_transaction"
        ) && !recv.is_empty()
        {
            return Act::Begin;
        }
        let is_redis = recv
            .iter()
            .any(|r| has_any(r, REDIS_WORDS) || jvm_vocab::is_redis_client(r));
        if let Some(act) = self.redis(call, &m, is_redis) {
            return act;
        }
        if self.is_publish(call, &m, &recv_text) {
            return Act::Publish;
        }
        if self.is_http_create(call, &m, &recv_text) {
            return Act::HttpCreate;
        }
        if let Some(act) = self.firestore(call, &m) {
            return act;
        }
        self.orm(call, &m, &recv)
    }

    /// Firestore's modular API, plain functions on a reference: `addDoc(collection(db,
    /// "bookings"), data)`, `getDocs(query(ref, where(…)))`, `updateDoc(ref, data)`,
    /// `setDoc(doc(db, "bookings", id), data)` (keyed by the id: a safe create).
    fn firestore(&self, call: &Call, m: &str) -> Option<Act> {
        if call.callee.len() != 1 {
            return None;
        }
        // The collection named by the reference (through a local, a `query(…)` on it).
        fn named(facts: &FnFacts<'_>, e: &Expr, depth: u8) -> Option<String> {
            match e {
                Expr::Call(c) if matches!(c.method().as_str(), "collection" | "doc") => c
                    .args
                    .get(1)
                    .and_then(Expr::string_text)
                    .or_else(|| c.args.get(1).map(key_shape)),
                Expr::Call(c) if c.method() == "query" => {
                    c.args.first().and_then(|a| named(facts, a, depth))
                }
                Expr::Path(p) if p.len() == 1 && depth < 3 => facts
                    .values
                    .get(&p[0])
                    .and_then(|v| named(facts, v, depth + 1)),
                _ => None,
            }
        }
        let target = || {
            call.args
                .first()
                .and_then(|a| named(self, a, 0))
                .unwrap_or_default()
        };
        match m {
            "adddoc" => Some(Act::OrmCreate {
                target: target(),
                columns: None,
                safe: false,
            }),
            "setdoc" => Some(Act::OrmCreate {
                target: target(),
                columns: None,
                safe: true,
            }),
            "getdocs" | "getdoc" => Some(Act::OrmRead { target: target() }),
            "updatedoc" => Some(Act::OrmUpdate {
                target: target(),
                sets: Vec::new(),
                relative: false,
                ordered: false,
            }),
            _ => None,
        }
    }

    /// The shape of the key a Redis call names (`order:?`), its first non-context argument.
    fn redis_key(&self, call: &Call) -> String {
        // go-redis takes the context first: `rdb.Get(ctx, key)`.
        call.args
            .iter()
            .find(|a| !is_context(a))
            .map(|k| match k {
                Expr::Path(p) if p.len() == 1 => self.values.get(&p[0]).map_or_else(
                    || key_shape(k),
                    |v| {
                        let shape = key_shape(v);
                        match v {
                            // `String key = event.idempotencyKey()`: the accessor names it.
                            Expr::Call(c) if shape.is_empty() && c.receiver.is_none() => {
                                c.callee.join(".")
                            }
                            _ => shape,
                        }
                    },
                ),
                // `redis.hasKey(dedupKey(eventId))`: the key the helper returns.
                Expr::Call(c) if c.receiver.is_none() => (c.callee.last())
                    .and_then(|h| self.returns.get(h))
                    .map_or_else(|| key_shape(k), key_shape),
                other => key_shape(other),
            })
            .unwrap_or_default()
    }

    fn redis(&self, call: &Call, m: &str, is_redis: bool) -> Option<Act> {
        let key = self.redis_key(call);
        let act = self.redis_command(call, m, is_redis, &key)?;
        // A rate limiter's or lock's key counts requests or holds a mutex: no marker, no
        // effect of the event (`INCR ratelimit:<ip>`, `SET lock:<id> NX PX 30000`).
        if crate::words::paces_or_locks(&key) {
            return Some(Act::Other);
        }
        Some(act)
    }

    /// The Redis command a call makes, on the key `key`.
    fn redis_command(&self, call: &Call, m: &str, is_redis: bool, key: &str) -> Option<Act> {
        let nx_flag = jvm_vocab::sets_nx(call)
            || call
                .args
                .iter()
                .any(|a| matches!(a, Expr::Str(s) if s.eq_ignore_ascii_case("nx")))
            || call.option("nx").is_some()
            || call.args.iter().any(|a| {
                a.field("Mode")
                    .and_then(Expr::string_text)
                    .is_some_and(|s| s.eq_ignore_ascii_case("nx"))
            });
        if is_redis && let Some(command) = jvm_vocab::redis_command(m) {
            return Some(match command {
                jvm_vocab::RedisCommand::Claim => Act::RedisWrite {
                    key: key.to_string(),
                    nx: true,
                },
                jvm_vocab::RedisCommand::Read => Act::RedisRead {
                    key: key.to_string(),
                },
                jvm_vocab::RedisCommand::Incr => Act::RedisIncr,
            });
        }
        match m {
            // Rust's redis crate spells them `set_nx`, `hset_nx`, `set_ex`.
            "setnx" | "hsetnx" | "setifnotexists" | "set_nx" | "hset_nx" => Some(Act::RedisWrite {
                key: key.to_string(),
                nx: true,
            }),
            "sismember" | "hexists" | "sismembers" => Some(Act::RedisRead {
                key: key.to_string(),
            }),
            "incr" | "incrby" | "decr" | "decrby" | "hincrby" | "zincrby" | "incrbyfloat"
            | "hincrbyfloat"
                if is_redis || m != "incr" =>
            {
                Some(Act::RedisIncr)
            }
            // `GETEX` reads (and may reset the TTL), `GETDEL` reads and forgets.
            "get" | "exists" | "hget" | "getex" | "getdel" | "mget" | "hgetall" if is_redis => {
                Some(Act::RedisRead {
                    key: key.to_string(),
                })
            }
            "set" | "hset" | "sadd" | "setex" | "psetex" | "setjson" | "set_ex" if is_redis => {
                Some(Act::RedisWrite {
                    key: key.to_string(),
                    nx: nx_flag,
                })
            }
            _ => None,
        }
    }

    fn is_publish(&self, call: &Call, m: &str, recv: &str) -> bool {
        // An outbox's or effect ledger's enqueue writes a row in the database's transaction; a
        // relay or worker acts on it.
        if has_any(recv, &["outbox", "effect", "ledger"]) {
            return false;
        }
        let broker = has_any(
            recv,
            &[
                "producer",
                "kafka",
                "queue",
                "sqs",
                "sns",
                "publisher",
                "broker",
                "channel",
                "nats",
                "rabbit",
                "amqp",
                "topic",
                "pubsub",
                "eventbus",
                "bus",
                "kinesis",
                "eventbridge",
                "jetstream",
                "writer",
                "stream",
                "emitter",
                "ch",
                "inngest",
                "qstash",
            ],
        ) || recv == "js"
            || recv == "nc"
            || recv == "p";
        if jvm_vocab::is_publish(m, recv) {
            return true;
        }
        let command_arg = call.args.iter().any(|a| match a {
            Expr::Call(c) => {
                c.is_new
                    && c.callee.last().is_some_and(|n| {
                        n.ends_with("Command")
                            && ["Publish", "SendMessage", "PutEvents", "PutRecord"]
                                .iter()
                                .any(|p| n.starts_with(p))
                    })
            }
            _ => false,
        });
        match m {
            "publish" | "publishmessage" | "publishasync" | "publishwithcontext"
            | "sendtoqueue" | "basic_publish" | "produce" | "writemessages"
            | "sendmessagebatch" | "putrecord" | "putrecords" | "putevents" | "xadd"
            | "send_message" | "publish_message" => !recv.is_empty() || m == "publish",
            "sendmessage" | "sendmessages" | "send_and_wait" | "sendbatch" => broker,
            // pulsar-rs: `producer.create_message()…send_non_blocking()`, also through a
            // message builder variable (`msg_builder.with_content(m).send_non_blocking()`).
            "send_non_blocking" => broker || has_any(recv, &["msg", "message"]),
            "send" => {
                broker && !has_any(recv, &["res", "reply", "response", "ws", "socket"])
                    || command_arg
            }
            "emit" => {
                has_any(recv, &["kafka", "broker", "bus", "client", "producer"])
                    && !has_any(recv, &["socket", "io"])
            }
            "add" => has_any(recv, &["queue"]),
            // Job queues: asynq `client.Enqueue(task)`, rq `q.enqueue(f)`, Bull `queue.add`.
            "enqueue" | "enqueuecontext" | "enqueue_call" | "enqueue_in" | "enqueue_at" => {
                !recv.is_empty()
            }
            // Ruby: ActiveJob/Sidekiq jobs and mailers, WaterDrop and ruby-kafka producers.
            "perform_later" | "perform_async" | "perform_in" | "perform_at" | "perform_bulk"
            | "deliver_later" | "produce_sync" | "produce_async" | "produce_many_sync"
            | "deliver_message" => !recv.is_empty(),
            "delay" | "apply_async" | "send_task" => !recv.is_empty(),
            // A project's own publishing method: `EventPublisher.publishEvent(…)`,
            // `kafka_producer.produce_invoice_paid(…)`, `webhookQueue.enqueueWebhook(…)`,
            // `producer.sendEvent(…)`. `publishPost` on a blog's repository is not one.
            // Nor is Spring's in-process `ApplicationEventPublisher.publishEvent(…)`, whose
            // listeners are read apart.
            _ if m.starts_with("publish") => {
                broker && !has_any(recv, &["applicationevent"])
                    // "event" alone is a calendar's or a CMS's as often (`publish_event_page`).
                    || has_any(m, &["message", "msg", "topic", "notification"])
            }
            _ if m.starts_with("produce") || m.starts_with("send") => {
                broker && !has_any(recv, &["res", "reply", "response", "ws", "socket", "mail"])
            }
            _ if m.starts_with("enqueue") => !recv.is_empty(),
            _ => false,
        }
    }

    fn is_http_create(&self, call: &Call, m: &str, recv: &str) -> bool {
        // Building an object sends nothing (`SendNotifyEmail.new(email)`, `new
        // SendEmailCommand(…)`): its method or a client's `send` does.
        if call.is_new {
            return false;
        }
        let creating = |e: Option<&Expr>| {
            e.and_then(|v| match v {
                Expr::Str(s) => Some(s.to_ascii_uppercase()),
                Expr::Path(p) => p.last().map(|s| s.to_ascii_uppercase()),
                _ => None,
            })
            .is_some_and(|s| matches!(s.trim_start_matches("METHOD"), "POST" | "PUT" | "PATCH"))
        };
        let http_recv = has_any(
            recv,
            &[
                "axios",
                "http",
                "requests",
                "httpx",
                "client",
                "got",
                "superagent",
                "api",
                "ky",
                "fetch",
                "rest",
                "session",
                "request",
                // Ruby's HTTP clients: `Faraday.post(url)`, `Typhoeus.post`, `Excon.post`.
                "faraday",
                "typhoeus",
                "excon",
            ],
        ) && !has_any(recv, &["redis", "db", "prisma", "supabase"]);
        let root = call.callee.first().map(|s| norm(s)).unwrap_or_default();
        // A model of an ORM client named for a provider (`prisma.stripeInvoices.create`) is
        // the database's.
        if matches!(
            root.as_str(),
            "prisma" | "db" | "supabase" | "knex" | "tx" | "trx" | "drizzle" | "sequelize"
        ) && call.callee.len() > 2
        {
            return false;
        }
        if jvm_vocab::is_http_create(call, m)
            || jvm_vocab::is_stripe_create(call)
            || crate::code_host::is_write(call)
        {
            return true;
        }
        match m {
            "fetch" | "$fetch" | "ofetch" => creating(call.option("method")),
            "post" | "put" | "patch" | "postform" => http_recv || recv.is_empty() && m == "post",
            "request" => creating(call.option("method")),

            "newrequest" | "newrequestwithcontext" => {
                call.args.iter().take(2).any(|a| creating(Some(a)))
            }
            "sendmail" | "send_mail" | "sendemail" | "send_email" | "sendtemplate" => true,
            // An object stored in S3 or a look-alike (the AWS SDKs' `put_object`/`putObject`).
            "put_object" | "putobject" => !recv.is_empty(),
            // ActionMailer: `OrderMailer.receipt(order).deliver_now` sends the mail now.
            "deliver_now" => !recv.is_empty(),
            // A chat API's post: Slack `client.chat_postMessage(…)`, `app.client.chat.postMessage`.
            _ if norm(m).ends_with("postmessage")
                && !recv.is_empty()
                && !has_any(
                    recv,
                    &["window", "worker", "port", "parent", "iframe", "self"],
                ) =>
            {
                true
            }
            // Helpers that send mail or messages: `self._send_confirmation_email(order)`.
            _ if norm(m).contains("send")
                && ["email", "mail", "sms", "notification"]
                    .iter()
                    .any(|w| norm(m).contains(w) || has_any(recv, &[w])) =>
            {
                true
            }
            // Mail clients; and reqwest `client.request(method, url).body(b).send()`, a request
            // whose method is known only at run time (a webhook sender's) carrying a body.
            "send" => {
                has_any(
                    recv,
                    &[
                        "mail", "sgmail", "resend", "postmark", "sms", "emails", "twilio",
                    ],
                ) || self.mail_transport(call)
                    || call.callee.iter().any(|s| s == "request")
                        && call
                            .callee
                            .iter()
                            .any(|s| matches!(s.as_str(), "body" | "json" | "form" | "multipart"))
                    || built_with_creating_method(call)
            }
            // A payment provider's client or a service wrapping it creating something:
            // `stripe.charges.create`, `h.stripeService.CreatePaymentIntent(…)`.
            _ if m.starts_with("create") && (root == "stripe" || provider_client(call)) => true,
            // A provider's object changed: `stripe.customers.update(…)`,
            // `clerkClient.users.updateUserMetadata(…)`.
            _ if ["update", "pay", "capture", "cancel", "refund"]
                .iter()
                .any(|p| m.starts_with(p))
                && (provider_client(call) || self.provider_object(call)) =>
            {
                true
            }
            // `user.user_transfers.create!(…)`, `conversation.messages.create!(…)`: an
            // association of a row loaded from a model is the database's, whatever it is named.
            "create" if self.loaded_row(&call.callee[..call.callee.len() - 1], 0) => false,
            "create" => {
                has_any(
                    recv,
                    &[
                        "messages",
                        "charges",
                        "paymentintents",
                        "refunds",
                        "transfers",
                        "payouts",
                        "invoices",
                    ],
                ) || self.sdk_object_create(call)
            }
            _ => false,
        }
    }

    /// `transfer = PagarMe::Transfer.new(attrs); transfer.create`: an object of a namespaced
    /// class built and then told to `create` itself, as the SDKs of payment providers do
    /// (ActiveRecord's rows `save`; they have no instance `create`).
    fn sdk_object_create(&self, call: &Call) -> bool {
        let [row, _] = call.callee.as_slice() else {
            return false;
        };
        let constant = |s: &str| s.starts_with(|c: char| c.is_ascii_uppercase());
        call.args.is_empty()
            && call.kwargs.is_empty()
            && matches!(self.values.get(row), Some(Expr::Call(made))
                if made.is_new
                    && made.callee.len() >= 2
                    && made.callee.iter().all(|s| constant(crate::ir::as_written(s))))
    }

    /// Whether `call` is a method of a local (`local.method(…)`) whose value was made by a
    /// call `made` answers true for.
    fn on_local_made_by(&self, call: &Call, made: impl Fn(&Call) -> bool) -> bool {
        call.callee.len() == 2
            && matches!(self.values.get(&call.callee[0]), Some(Expr::Call(c)) if made(c))
    }

    /// `transport.send(message)` on a local built as a mail transport (lettre's
    /// `AsyncSmtpTransport::starttls_relay(host)?…build()`, a `Mailer`): the mail goes out.
    fn mail_transport(&self, call: &Call) -> bool {
        self.on_local_made_by(call, |made| {
            made.callee.iter().any(|s| has_any(s, &["smtp", "mailer"]))
        })
    }

    /// A method of an object a provider's SDK returned (`charge = Stripe::Charge.retrieve(id)`
    /// makes `charge.refund` a call to Stripe).
    fn provider_object(&self, call: &Call) -> bool {
        self.on_local_made_by(call, provider_client)
    }

    fn orm(&self, call: &Call, m: &str, recv: &[String]) -> Act {
        let chain = call
            .callee
            .iter()
            .map(|s| s.to_lowercase())
            .collect::<Vec<_>>();
        let safe_chain = chain.iter().any(|c| {
            c.contains("onconflict")
                || c == "clauses"
                || c == "ignore"
                || c.contains("upsert")
                || c == "merge"
        }) || call.option("ignore_conflicts").is_some()
            || call.option("ignoreDuplicates").is_some()
            || call.option("upsert").is_some()
            || call.option("ConditionExpression").is_some()
            || call.option("update_conflicts").is_some();
        if jvm_vocab::is_library_call(call) {
            return Act::Other;
        }
        let target = || self.target_of(call);
        const NOT_ORM: &[&str] = &[
            "stripe",
            "axios",
            "http",
            "json",
            "object",
            "array",
            "math",
            "promise",
            "console",
            "logger",
            "log",
            "res",
            "window",
            "document",
            "map",
            "set",
            "list",
            "crypto",
            "uuid",
            "date",
            "fs",
            "path",
            "os",
            "strings",
            "errors",
            "fmt",
            "router",
            "app",
            "schema",
            "z",
            "yup",
            "joi",
            "response",
            "reply",
            "w",
            "c",
            "ctx",
            "r",
            "req",
            "request",
            "hmac",
            "hash",
            "hasher",
            "cipher",
            "decipher",
            "signer",
            "verifier",
            "md5",
            "sha1",
            "sha256",
            "shasum",
            "createhmac",
            "createhash",
            "createsign",
            "createverify",
            "createcipheriv",
            "createdecipheriv",
            "sentry",
            "posthog",
            "analytics",
            "tracer",
            "span",
            "newrelic",
            "datadog",
            "telemetry",
        ];
        // A one-letter root with more after it is a Go receiver (`c.db.Create`), not gin's `c`.
        let ormish = !recv.is_empty()
            && !recv.iter().enumerate().any(|(i, r)| {
                NOT_ORM.contains(&r.as_str()) && !(i == 0 && r.len() == 1 && recv.len() > 1)
            });
        // A row a model's class method loaded is the ORM's whatever its local is called
        // (`object = model_class.find(id)`, JavaScript's `Object` aside).
        if !ormish && self.loaded_model(call).is_none() || self.hasher(call) {
            return Act::Other;
        }
        let model_like = recv.iter().any(|r| {
            has_any(
                r,
                &[
                    "prisma",
                    "repo",
                    "repository",
                    "store",
                    "dao",
                    "model",
                    "collection",
                    "table",
                    "objects",
                    "manager",
                    "db",
                    "session",
                    "sess",
                    "tx",
                    "trx",
                    "orm",
                    "queries",
                    "service",
                    "svc",
                    "usecase",
                    "em",
                    "knex",
                    "sequelize",
                    "mongoose",
                    "supabase",
                    "from",
                    "gorm",
                    "q",
                ],
            )
        }) || call
            .callee
            .first()
            .is_some_and(|r| r.chars().next().is_some_and(char::is_uppercase))
            || call.receiver.is_some()
            // `product.save()`: an active-record save of a row held in a local (Django,
            // Mongoose, ActiveRecord-style ORMs), whatever the local is called; keyword
            // arguments (`update_fields=…`, a model's own flags) keep it one.
            || m == "save" && call.callee.len() == 2 && call.args.is_empty()
            || self.loaded_model(call).is_some()
            || recv.iter().any(|r| jvm_vocab::is_data_access(r))
            // Spring Data's `existsBy…`/`countBy…` are a repository's, whatever its field is called.
            || m.starts_with("existsby")
            || m.starts_with("countby")
            // `user.subscriptions.create!(…)`: an association of a loaded row.
            || call.callee.len() > 2
                && !matches!(m, "find" | "get")
                && self.loaded_row(&call.callee[..call.callee.len() - 1], 0);
        if !model_like {
            return Act::Other;
        }
        let create_prefix = [
            "create", "insert", "save", "add", "put", "persist", "store", "record",
        ];
        let safe_names = [
            "upsert",
            "createorupdate",
            "findorcreate",
            "firstorcreate",
            "getorcreate",
            "get_or_create",
            "update_or_create",
            "updateorcreate",
            "insertorignore",
            "createifnotexists",
            "insertorupdate",
            "findoneandupdate",
            "findbyidandupdate",
            "merge",
            "replaceone",
            "insert_or_ignore",
            "on_conflict_do_nothing",
            "onconflictdonothing",
        ];
        // `addIfAbsent(row)`, `saveIfNotExists(row)`: a create that skips an existing row.
        let if_absent = ["ifabsent", "ifnotexists", "ifmissing"]
            .iter()
            .any(|s| m.ends_with(s));
        if safe_names.iter().any(|s| m == *s || m.starts_with(s))
            || m.starts_with("upsert")
            || if_absent
        {
            // findOneAndUpdate with upsert is a safe create; without, it is an update.
            if m.starts_with("findoneandupdate") || m.starts_with("findbyidandupdate") {
                return self.orm_update(call, target());
            }
            // Prisma `upsert({ update: { credits: { increment: n } } })`: on the update branch a
            // redelivery applies the increment again.
            if m.starts_with("upsert")
                && let Some(update) = call.option("update")
                && let Act::OrmUpdate {
                    sets,
                    relative: true,
                    ordered,
                    ..
                } = self.orm_update_data(update, target())
            {
                return Act::OrmUpdate {
                    target: target(),
                    sets,
                    relative: true,
                    ordered,
                };
            }
            return Act::OrmCreate {
                target: target(),
                columns: self.columns_of(call),
                safe: true,
            };
        }
        if m.starts_with("update")
            || m == "updates"
            || m == "updatecolumn"
            || m == "updatecolumns"
            || m == "increment"
            || m == "decrement"
        {
            return self.orm_update(call, target());
        }
        // `save()` creates only a row built here; saving a loaded row updates it.
        if (m == "save" || jvm_vocab::is_save(m)) && !self.save_creates(call) {
            return Act::OrmUpdate {
                target: target(),
                sets: self.fields_set_before_save(call),
                relative: false,
                ordered: false,
            };
        }
        if jvm_vocab::is_static_factory(call) {
            return Act::Other;
        }
        let session_add = m == "add" && recv.iter().any(|r| has_any(r, &["session", "db"]));
        let add_ok = m != "add" || session_add;
        if add_ok
            && (m == "save"
                || create_prefix.iter().any(|p| m.starts_with(p))
                    && m != "addeventlistener"
                    && !m.starts_with("record")
                || m == "bulk_create"
                || m == "bulkcreate"
                || m == "create_all"
                || m == "insertone"
                || m == "insertmany"
                || m == "createmany"
                || m == "putitem"
                || m == "put_item"
                || jvm_vocab::is_dao_new(call))
        {
            if m == "store" || m == "record" {
                return Act::Other;
            }
            return Act::OrmCreate {
                target: target(),
                columns: self.columns_of(call),
                safe: safe_chain,
            };
        }
        let read = [
            "findunique",
            "findfirst",
            "findone",
            "findbyid",
            "findbypk",
            "findoneby",
            "exists",
            "exist",
            "first",
            "count",
            "one_or_none",
            "scalar_one_or_none",
            "get",
            "find",
            "take",
            "getitem",
            "get_item",
            "find_one",
            "filter_by",
            "findoneorfail",
            "findby",
        ];
        if jvm_vocab::is_derived_read(m)
            || read.iter().any(|r| {
                m == *r
                    || m.starts_with("findby")
                    || m.starts_with("find_by")
                    || m.starts_with("get_by")
                    || m.starts_with("getby") && m.len() > 5
            })
        {
            if m == "get"
                && !recv.iter().any(|r| {
                    r == "objects"
                        || has_any(
                            r,
                            &[
                                "repo",
                                "session",
                                "store",
                                "dao",
                                "db",
                                "table",
                                "collection",
                            ],
                        )
                })
            {
                return Act::Other;
            }
            return Act::OrmRead { target: target() };
        }
        Act::Other
    }

    /// `mac.update(bytes)` on a MAC or hasher a local holds (`HmacSha256::new_from_slice(key)`,
    /// `Sha256::new()`, `crypto.createHash(…)`): it feeds bytes in, it writes no row.
    fn hasher(&self, call: &Call) -> bool {
        const HASHERS: &[&str] = &[
            "hmac",
            "sha1",
            "sha2",
            "sha3",
            "sha256",
            "sha384",
            "sha512",
            "md5",
            "blake",
            "hasher",
            "createhash",
            "digest",
        ];
        call.callee.len() == 2
            && matches!(self.values.get(&call.callee[0]), Some(Expr::Call(c))
            if c.callee.iter().any(|s| {
                let s = norm(s);
                HASHERS.iter().any(|h| s.starts_with(h))
            }))
    }

    /// An update whose data is `data` alone (the `update` branch of an upsert).
    /// Drizzle's and Kysely's `db.update(table).set({ … })`: the columns are the `set`'s, the
    /// table the `update`'s argument (the `update(table)` call alone names no column).
    fn drizzle_set(&self, call: &Call) -> Option<Act> {
        let update = call.receiver.as_deref()?;
        if call.method() != "set"
            || update.method() != "update"
            || update.callee.len() != 2
            || update.receiver.is_some()
        {
            return None;
        }
        let root = update.callee[0].to_lowercase();
        if !has_any(&root, &["db", "tx", "trx", "drizzle", "kysely"]) {
            return None;
        }
        let Some(Expr::Path(table)) = update.args.first() else {
            return None;
        };
        let data = call.args.first()?;
        let data = match data {
            Expr::Path(p) if p.len() == 1 => self.values.get(&p[0]).unwrap_or(data),
            other => other,
        };
        let mut act = self.orm_update_data(data, table.join("."));
        if let Act::OrmUpdate { sets, .. } = &mut act {
            sets.retain(|c| c != "data");
        }
        Some(act)
    }

    /// Drizzle's `db.insert(table).values({ … })`: the create is the `values` call (the
    /// `insert(table)` before it is nothing yet), safe when the chain goes on to
    /// `.onConflictDoNothing()` / `.onConflictDoUpdate()`, read from the calls of the same
    /// chain lowered after it.
    fn drizzle_insert(&self, call: &Call) -> Option<Act> {
        // The innermost call of the chain: `db.insert(table)`.
        let mut insert = call;
        while let Some(inner) = insert.receiver.as_deref() {
            insert = inner;
        }
        // Knex's `trx('payments').insert(row)` is on a call's result, not on the client.
        if insert.method() != "insert" || insert.callee.len() != 2 || insert.receiver.is_some() {
            return None;
        }
        let root = insert.callee[0].to_lowercase();
        if !has_any(&root, &["db", "tx", "trx", "drizzle"]) {
            return None;
        }
        let Some(Expr::Path(table)) = insert.args.first() else {
            return None;
        };
        // Only `values` creates: `insert(table)` is nothing yet, and the calls after it
        // (`onConflictDoNothing`, `returning`) are read with it below.
        if call.method() != "values" {
            return Some(Act::Other);
        }
        let chain_after =
            self.func.ops[self.acts.len() + 1..]
                .iter()
                .map_while(|op| match &op.kind {
                    OpKind::Call(c) if c.callee.starts_with(&call.callee) => Some(c),
                    _ => None,
                });
        let safe = chain_after
            .flat_map(|c| c.callee.iter())
            .any(|m| m.to_lowercase().contains("onconflict"));
        let columns = match call.args.first() {
            Some(Expr::Object { fields, .. }) => Some(
                fields
                    .iter()
                    // `id: v7()`, `id: crypto.randomUUID()`: a fresh id hits no key.
                    .filter(|(k, v)| k != "..." && !matches!(v, Expr::Call(c) if c.args.is_empty()))
                    .map(|(k, _)| k.clone())
                    .collect(),
            ),
            _ => None,
        };
        Some(Act::OrmCreate {
            target: table.join("."),
            columns,
            safe,
        })
    }

    fn orm_update_data(&self, data: &Expr, target: String) -> Act {
        let call = Call {
            callee: vec!["update".into()],
            receiver: None,
            args: Vec::new(),
            kwargs: vec![("data".into(), data.clone())],
            is_new: false,
            pos: crate::ir::Pos::default(),
        };
        self.orm_update(&call, target)
    }

    fn orm_update(&self, call: &Call, target: String) -> Act {
        let mut sets = Vec::new();
        let mut relative = matches!(call.method().as_str(), "increment" | "decrement")
            || jvm_vocab::increments(call);
        let mut ordered = false;
        // The data: Prisma `data`, Mongo `$set`/`$inc` (second argument), Django and
        // SQLAlchemy keyword arguments, GORM `Updates(map/struct)` or `Update("col", v)`.
        // Data held in a local (`update({ where, data })` with `data` built before) is the
        // local's value.
        let local = |e: &'_ Expr| -> Option<Expr> {
            match e {
                Expr::Path(p) if p.len() == 1 => self.values.get(&p[0]).cloned(),
                _ => None,
            }
        };
        // So is a lone argument held in a local (ActiveRecord `sub.update!(attrs)`).
        let lone = call.args.first().filter(|_| call.args.len() == 1);
        // And Mongo's update document (`findOneAndUpdate(filter, updateData, …)`).
        let held: Vec<Expr> = call
            .option("data")
            .or(lone)
            .and_then(local)
            .into_iter()
            .chain(call.args.get(1).and_then(local))
            .collect();
        let data: Vec<&Expr> = call
            .option("data")
            .into_iter()
            .chain(held.iter())
            .chain(call.args.get(1))
            .chain(call.args.first().filter(|_| call.option("data").is_none()))
            .collect();
        for d in data {
            d.walk(&mut |e| {
                if let Expr::Object { fields, .. } = e {
                    for (k, v) in fields {
                        let nk = norm(k);
                        if nk == "inc" || nk == "increment" || nk == "decrement" {
                            relative = true;
                        }
                        if !k.starts_with('$')
                            && !matches!(nk.as_str(), "where" | "data" | "increment" | "decrement")
                        {
                            sets.push(k.clone());
                        }
                        if let Expr::Call(c) = v
                            && c.method() == "expr"
                            && let Some(frag) = c.args.first().and_then(Expr::string_text)
                            && sql::fragment_is_relative(k, &frag)
                        {
                            relative = true;
                        }
                    }
                }
            });
        }
        for (k, v) in &call.kwargs {
            sets.push(k.clone());
            if relative_value(k, v) {
                relative = true;
            }
        }
        if call.method() == "update" && call.args.len() == 2 {
            if let (Some(col), Some(Expr::Call(c))) = (call.args[0].string_text(), call.args.get(1))
            {
                if c.method() == "expr"
                    && let Some(frag) = c.args.first().and_then(Expr::string_text)
                {
                    relative |= sql::fragment_is_relative(&col, &frag);
                }
                sets.push(col);
            } else if let Some(col) = call.args[0].string_text() {
                sets.push(col);
            }
        }
        // The filter: Prisma `where`, Mongo first argument, Django `filter(...)` keywords,
        // SQLAlchemy `.where(Model.version < v)`, GORM `.Where("version < ?", v)`.
        let mut filters: Vec<&Expr> = call.option("where").into_iter().collect();
        if call.option("data").is_none() {
            filters.extend(call.args.first());
        }
        let mut r = call.receiver.as_deref();
        while let Some(inner) = r {
            let im = inner.method();
            if matches!(
                im.as_str(),
                "where" | "filter" | "filter_by" | "updateone" | "findoneandupdate"
            ) {
                for (k, _) in &inner.kwargs {
                    let lk = k.to_lowercase();
                    if ["__lt", "__lte", "__gt", "__gte"]
                        .iter()
                        .any(|s| lk.ends_with(s))
                        && crate::words::is_order_column(lk.split("__").next().unwrap_or(""))
                    {
                        ordered = true;
                    }
                }
                for a in &inner.args {
                    if let Some(frag) = a.string_text() {
                        ordered |= sql::fragment_compares_order(&frag);
                    }
                    ordered |= expr_compares_order(a);
                }
            }
            r = inner.receiver.as_deref();
        }
        for f in filters {
            ordered |= expr_compares_order(f);
        }
        Act::OrmUpdate {
            target,
            sets,
            relative,
            ordered,
        }
    }

    /// The model of a row held in a local loaded by a model's class method
    /// (`wallet = Wallet.find(id)` makes `wallet.increment!(…)` a write of Wallet).
    /// The value a local holds; for `payment = find_payment(id)`, what the helper returned
    /// (`Payment.find_by(…)`), so that the local is the row its finder loaded.
    fn held(&self, local: &str) -> Option<&Expr> {
        let value = self.values.get(local)?;
        match value {
            Expr::Call(helper)
                if helper.callee.len() == 1 && helper.receiver.is_none() && !helper.is_new =>
            {
                self.returns.get(&helper.callee[0]).or(Some(value))
            }
            other => Some(other),
        }
    }

    fn loaded_model(&self, call: &Call) -> Option<String> {
        if call.callee.len() != 2 {
            return None;
        }
        let Expr::Call(made) = self.held(&call.callee[0])? else {
            return None;
        };
        let constant = |s: &String| {
            s.chars().next().is_some_and(char::is_uppercase)
                && !s.chars().all(|c| c.is_uppercase() || c == '_')
        };
        // `purchase = Purchase.find_or_initialize_by(k)` (lowered as a look-up, then a row
        // built), then `purchase.update(attrs)`: ActiveRecord writes the row, found or new.
        if made.is_new
            && matches!(call.method().as_str(), "update" | "update_attributes")
            && let [model] = made.callee.as_slice()
            && constant(model)
        {
            return Some(model.clone());
        }
        // `Pay::Subscription.find_by(…)`: the last constant of the path is the model.
        let n = made.callee.len().saturating_sub(1);
        if !made.is_new && n > 0 && self.names_class(&made.callee[0]) {
            return Some(made.callee[0].clone());
        }
        if made.is_new || n == 0 || !constant(&made.callee[0]) {
            return None;
        }
        made.callee[..n].iter().rev().find(|s| constant(s)).cloned()
    }

    /// Whether `path` (`user`, `self.user`, `order.user`) holds a row loaded by a model's
    /// class method (`user = User.find(id)`), or reached from one through its attributes or
    /// a query on it (`sub = user.subscriptions.where(…).first`), through aliases: the
    /// ActiveRecord and Django association chains (`user.charges.create(…)`).
    fn loaded_row(&self, path: &[String], depth: u8) -> bool {
        let key = match path {
            [s, field, ..] if s == "self" || s == "this" => format!("{s}.{field}"),
            [root, ..] => root.clone(),
            [] => return false,
        };
        let constant = |s: &String| {
            s.chars().next().is_some_and(char::is_uppercase)
                && !s.chars().all(|c| c.is_uppercase() || c == '_')
        };
        match self.held(&key) {
            Some(Expr::Call(made)) if !made.is_new && made.callee.len() >= 2 => {
                constant(&made.callee[0])
                    || self.names_class(&made.callee[0])
                    || depth < 4
                        && self.loaded_row(&made.callee[..made.callee.len() - 1], depth + 1)
            }
            Some(Expr::Path(p)) if depth < 4 && *p != path => self.loaded_row(p, depth + 1),
            _ => false,
        }
    }

    /// The model of the row whose association a call goes through (`user.charges.create(…)`
    /// with `user = User.find(id)`: `User`), whose foreign key the association fills.
    pub(crate) fn association_owner(&self, call: &Call) -> Option<String> {
        let owner = match call.callee.as_slice() {
            [s, field, _, _] if s == "self" || s == "this" => vec![s.clone(), field.clone()],
            [root, _, _] => vec![root.clone()],
            _ => return None,
        };
        self.row_model(&owner, 0)
    }

    /// Whether a local holds a class chosen at run time: Rails' `model =
    /// payload["resource_type"].classify.constantize`, whose `model.find(id)` loads a row.
    fn names_class(&self, local: &str) -> bool {
        matches!(self.values.get(local), Some(Expr::Call(c))
            if matches!(c.method().as_str(), "constantize" | "safe_constantize"))
    }

    /// The model a row held at `path` was loaded by (`User.lock.find(id)`: `User`), through
    /// aliases.
    fn row_model(&self, path: &[String], depth: u8) -> Option<String> {
        let key = match path {
            [s, field, ..] if s == "self" || s == "this" => format!("{s}.{field}"),
            [root] => root.clone(),
            _ => return None,
        };
        let constant = |s: &String| {
            s.chars().next().is_some_and(char::is_uppercase)
                && !s.chars().all(|c| c.is_uppercase() || c == '_')
        };
        match self.held(&key)? {
            Expr::Call(made) if !made.is_new && made.callee.len() >= 2 => {
                let n = made.callee.len() - 1;
                if !constant(&made.callee[0]) {
                    return None;
                }
                made.callee[..n].iter().rev().find(|s| constant(s)).cloned()
            }
            Expr::Path(p) if depth < 4 && *p != path => self.row_model(p, depth + 1),
            _ => None,
        }
    }

    /// The model or table an ORM call is about: a table named in the chain (`knex("orders")`,
    /// `db.collection("orders")`, `supabase.from("orders")`, GORM `Table("orders")`), the model
    /// the row is built from (`session.add(Order(…))`, `db.Create(&Order{…})`), the model in
    /// the callee (`Order.objects.create`, `prisma.order.create`, `orderRepo.save`), or the
    /// method's name (`q.CreateOrder`). Empty when none says.
    fn target_of(&self, call: &Call) -> String {
        if let Some(entity) = jvm_vocab::template_entity(call) {
            return entity;
        }
        let mut r = call.receiver.as_deref();
        let mut innermost = call;
        while let Some(inner) = r {
            let im = inner.method();
            let tableish = inner.callee.len() == 1
                || matches!(
                    im.as_str(),
                    "table" | "from" | "collection" | "into" | "model" | "getrepository"
                );
            if tableish {
                if let Some(s) = inner.args.first().and_then(Expr::string_text) {
                    return s;
                }
                if let Some(t) = inner.args.first().and_then(|a| self.model_of(a)) {
                    return t;
                }
                // `supabase.from(PROCESSED_EVENTS_TABLE)`: the constant's text, or its name.
                if let Some(Expr::Path(p)) = inner.args.first()
                    && let [name] = p.as_slice()
                {
                    if let Some(s) = self.values.get(name).and_then(Expr::string_text) {
                        return s;
                    }
                    let constant = name.len() > 3
                        && name
                            .chars()
                            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
                    if constant {
                        return name.to_lowercase();
                    }
                }
            }
            innermost = inner;
            r = inner.receiver.as_deref();
        }
        // The row given (after a Go `ctx`: `repo.Create(ctx, &WebhookEvent{…})`).
        if let Some(t) = (call.args.iter().find(|a| !is_context(a))).and_then(|a| self.model_of(a))
        {
            return t;
        }
        // SQLAlchemy's `session.get(Model, id)` and `session.query(Model)`: the model.
        if matches!(call.method().as_str(), "get" | "get_one" | "query")
            && let Some(Expr::Path(p)) = call.args.first()
            && let [model] = p.as_slice()
            && model.starts_with(|ch: char| ch.is_ascii_uppercase())
        {
            return model.clone();
        }
        if let Some(t) = self.loaded_model(call) {
            return t;
        }
        // `order = Order.new(…); order.save!`: the model the row was built as (a row's own
        // save takes no row: `productRepository.save(product)` is the repository's).
        if call.callee.len() == 2
            && call.method() == "save"
            && call.args.is_empty()
            && let Some(t) = self.model_of(&Expr::Path(vec![call.callee[0].clone()]))
        {
            return t;
        }
        let root = &innermost.callee[..innermost.callee.len().saturating_sub(1)];
        let segs: Vec<&String> = root
            .iter()
            .filter(|s| {
                let l = s.to_lowercase();
                !matches!(
                    l.as_str(),
                    "objects"
                        | "this"
                        | "self"
                        | "prisma"
                        | "db"
                        | "tx"
                        | "trx"
                        | "session"
                        | "ctx"
                        | "em"
                        | "manager"
                        | "q"
                        | "queries"
                        | "models"
                        | "client"
                        | "conn"
                        | "c"
                )
            })
            .collect();
        if let Some(last) = segs.last() {
            let l = last.to_lowercase();
            for suffix in [
                "repository",
                "repo",
                "store",
                "dao",
                "model",
                "collection",
                "table",
            ] {
                if let Some(stem) = l.strip_suffix(suffix)
                    && !stem.is_empty()
                {
                    return stem.trim_end_matches('_').to_string();
                }
            }
            return (*last).clone();
        }
        let method = call.callee.last().map(|s| s.as_str()).unwrap_or("");
        for prefix in [
            "Create", "Insert", "Save", "Upsert", "create_", "insert_", "save_", "upsert_",
        ] {
            if let Some(rest) = method.strip_prefix(prefix)
                && !rest.is_empty()
            {
                return rest.to_string();
            }
        }
        String::new()
    }

    /// The fields assigned on a loaded row before its `save()` (`sub.current_period_end = …;
    /// sub.save()`): the columns an active-record save writes. Reads the operations lowered so
    /// far, which end at this call.
    fn fields_set_before_save(&self, call: &Call) -> Vec<String> {
        // `sub.save()`, or a repository's `save(sub)`.
        let saved = match call.args.first() {
            Some(Expr::Path(p)) if p.len() == 1 => p.first(),
            _ => call.callee.first().filter(|_| call.callee.len() == 2),
        };
        let Some(root) = saved else {
            return Vec::new();
        };
        let mut sets = Vec::new();
        for op in &self.func.ops[..self.acts.len()] {
            if let OpKind::Assign { targets, .. } = &op.kind {
                for t in targets {
                    if let Some((r, field)) = t.split_once('.')
                        && r == root
                        && !field.contains(['.', '['])
                        && !sets.iter().any(|s| s == field)
                    {
                        sets.push(field.to_string());
                    }
                }
            }
        }
        sets
    }

    /// Whether a `save` stores a row built in this function (`new Order(…)`, `Order(…)`,
    /// `&Order{…}` with fields) rather than one loaded and changed.
    fn save_creates(&self, call: &Call) -> bool {
        if call.option("update_fields").is_some() {
            return false;
        }
        let built = |e: &Expr| match e {
            Expr::Call(c) => {
                c.is_new
                    || jvm_vocab::built_by_builder(c)
                    || c.callee
                        .last()
                        .is_some_and(|n| n.chars().next().is_some_and(char::is_uppercase))
            }
            Expr::Object { fields, .. } => !fields.is_empty(),
            _ => false,
        };
        let resolve = |e: &'_ Expr| -> Option<Expr> {
            match e {
                Expr::Path(p) if p.len() == 1 => self.values.get(&p[0]).cloned(),
                other => Some(other.clone()),
            }
        };
        // `order.save({ session })`: Mongoose save options, not a row.
        let options = |e: &Expr| {
            matches!(e, Expr::Object { fields, .. } if fields.iter().all(|(k, _)| matches!(
                k.as_str(),
                "session" | "transaction" | "validateBeforeSave" | "timestamps" | "w" | "j"
            )))
        };
        match call.args.first().filter(|a| !options(a)) {
            Some(arg) => resolve(arg).is_some_and(|v| built(&v)),
            None => call
                .callee
                .first()
                .filter(|_| call.callee.len() == 2)
                .and_then(|root| self.values.get(root))
                .is_some_and(built),
        }
    }

    /// The model an argument is an instance of: `Order(…)`, `new Order(…)`, `&Order{…}`, or
    /// a variable holding one (`var inv Invoice`).
    fn model_of(&self, arg: &Expr) -> Option<String> {
        if is_context(arg) {
            return None;
        }
        let resolved = self.resolved(arg)?;
        // `db.session.get(Model, id) or Model(user_id=…)`: a found-or-built row.
        if let Expr::Binary { op, left, right } = resolved
            && matches!(op.as_str(), "or" | "||" | "??")
        {
            return self.model_of(left).or_else(|| self.model_of(right));
        }
        // SQLAlchemy's `session.get(Model, id)`: the model the look-up is of.
        if let Expr::Call(c) = resolved
            && matches!(c.method().as_str(), "get" | "get_one" | "merge")
            && let Some(Expr::Path(p)) = c.args.first()
            && let [model] = p.as_slice()
            && model.starts_with(|ch: char| ch.is_ascii_uppercase())
        {
            return Some(model.clone());
        }
        if let Expr::Call(c) = resolved
            && let Some(model) = jvm_vocab::builder_model(c)
        {
            return Some(model);
        }
        match resolved {
            Expr::Call(c)
                if c.callee
                    .last()
                    .is_some_and(|n| n.chars().next().is_some_and(char::is_uppercase)) =>
            {
                c.callee.last().cloned()
            }
            Expr::Object {
                type_name: Some(t), ..
            } => Some(t.rsplit('.').next().unwrap_or(t).to_string()),
            _ => None,
        }
    }

    /// The columns of an ORM create, when written out.
    fn columns_of(&self, call: &Call) -> Option<Vec<String>> {
        let mut cols = self.given_columns(call)?;
        // `user.charges.create(…)` fills `charges.user_id`.
        cols.extend(self.association_owner(call));
        Some(cols)
    }

    fn given_columns(&self, call: &Call) -> Option<Vec<String>> {
        if !call.kwargs.is_empty() {
            return Some(call.kwargs.iter().map(|(k, _)| k.clone()).collect());
        }
        let data = call.option("data").or_else(|| call.args.first())?;
        let resolved = self.resolved(data)?;
        match resolved {
            Expr::Object { fields, .. } => Some(self.field_names(fields)),
            Expr::Call(c) if !c.kwargs.is_empty() => {
                Some(c.kwargs.iter().map(|(k, _)| k.clone()).collect())
            }
            Expr::Call(c) => c.args.iter().find_map(|a| match a {
                Expr::Object { fields, .. } => {
                    Some(fields.iter().map(|(k, _)| k.clone()).collect())
                }
                _ => None,
            }),
            _ => None,
        }
    }

    /// The keys of an object literal, a spread of a local object (`{ ...row, id }`) read
    /// through.
    fn field_names(&self, fields: &[(String, Expr)]) -> Vec<String> {
        let mut out = Vec::new();
        for (k, v) in fields {
            match (k.as_str(), v) {
                ("...", Expr::Path(p)) if p.len() == 1 => {
                    if let Some(Expr::Object { fields: inner, .. }) = self.values.get(&p[0]) {
                        out.extend(inner.iter().map(|(k, _)| k.clone()));
                    }
                }
                ("...", _) => {}
                _ => out.push(k.clone()),
            }
        }
        out
    }

    /// Gives each op its transaction: a lexical one (callback, `with` block), an explicit
    /// `BEGIN`…`COMMIT`, a transaction variable (`tx.Exec`), or (Python) the implicit
    /// transaction of a session or connection, which `commit()` ends.
    fn assign_transactions(&mut self, implicit: bool) {
        let mut next = 1_000_000u32;
        let mut explicit: Option<u32> = None;
        let mut vars: HashMap<String, u32> = HashMap::new();
        let mut implicit_segment = next;
        let ops = &self.func.ops;
        for (i, op) in ops.iter().enumerate() {
            let mut tx = op.lexical_tx.or(explicit);
            match (&op.kind, &self.acts[i]) {
                (OpKind::Call(_), Act::Sql(SqlStmt::Begin)) => {
                    next += 1;
                    explicit = Some(next);
                    tx = explicit;
                }
                (OpKind::Call(_), Act::Sql(SqlStmt::Commit | SqlStmt::Rollback)) => {
                    explicit = None;
                }
                // `await startTransaction(connection)` … `await commit(connection)`: helpers
                // of a query builder that send BEGIN and COMMIT on the connection passed.
                (OpKind::Call(call), _) if begins_on_connection(call) => {
                    next += 1;
                    explicit = Some(next);
                    tx = explicit;
                }
                (OpKind::Call(call), _) if ends_on_connection(call) => {
                    explicit = None;
                }
                (OpKind::Call(call), act) => {
                    let root = call.callee.first().cloned().unwrap_or_default();
                    if let Some(id) = vars.get(&root) {
                        tx = tx.or(Some(*id));
                        if matches!(act, Act::Commit) {
                            vars.remove(&root);
                        }
                    } else if implicit
                        && session_like(call)
                        && (act.is_db_write() || matches!(act, Act::Sql(_) | Act::OrmRead { .. }))
                    {
                        tx = tx.or(Some(implicit_segment));
                    } else if implicit && matches!(act, Act::Commit) {
                        tx = tx.or(Some(implicit_segment));
                        next += 1;
                        implicit_segment = next;
                    }
                }
                // A transaction handed on (`tx'1 = tx`: a helper's parameter bound to the
                // caller's transaction) is the same transaction.
                (
                    OpKind::Assign {
                        targets,
                        value: Expr::Path(p),
                        op: None,
                    },
                    _,
                ) if p.len() == 1 && vars.contains_key(&p[0]) => {
                    let id = vars[&p[0]];
                    for t in targets {
                        vars.insert(t.clone(), id);
                    }
                }
                (
                    OpKind::Assign {
                        targets,
                        value: Expr::Call(c),
                        ..
                    },
                    _,
                ) => {
                    let m = c.method();
                    if matches!(
                        m.as_str(),
                        "begin"
                            | "begintx"
                            | "beginx"
                            | "begintxx"
                            | "mustbegin"
                            | "mustbegintx"
                            | "starttransaction"
                            | "transaction"
                            | "connect"
                    ) && c.callee.len() > 1
                    {
                        next += 1;
                        if let Some(t) = targets.first()
                            && m != "connect"
                        {
                            vars.insert(t.clone(), next);
                        }
                    }
                }
                _ => {}
            }
            self.tx.push(tx);
        }
    }
}

const BEGIN_HELPERS: &[&str] = &["starttransaction", "begintransaction"];
const END_HELPERS: &[&str] = &[
    "commit",
    "rollback",
    "committransaction",
    "rollbacktransaction",
];

/// `startTransaction(connection)`: a query builder's helper that sends BEGIN.
pub(crate) fn begins_on_connection(call: &Call) -> bool {
    connection_helper(call, BEGIN_HELPERS)
}

/// `commit(connection)`, `rollback(connection)`.
pub(crate) fn ends_on_connection(call: &Call) -> bool {
    connection_helper(call, END_HELPERS)
}

/// A plain function call (`startTransaction(connection)`, `commit(conn)`) named in `names`
/// and given a connection.
fn connection_helper(call: &Call, names: &[&str]) -> bool {
    call.callee.len() == 1
        && names.contains(&call.method().as_str())
        && call.args.first().is_some_and(|a| {
            matches!(a, Expr::Path(p) if p.len() == 1
                && has_any(&p[0], &["conn", "client", "tx", "trx", "session"]))
        })
}

/// Calls on a DB-API connection or cursor or an SQLAlchemy session, which share one
/// transaction until `commit()`; Django's `Model.objects` autocommits each statement.
fn session_like(call: &Call) -> bool {
    let root = call
        .callee
        .first()
        .map(|s| s.to_lowercase())
        .unwrap_or_default();
    !call.callee.iter().any(|s| s == "objects")
        && ["session", "conn", "cur", "db", "connection", "tx", "txn"]
            .iter()
            .any(|w| root.contains(w))
}

/// A call on a provider's client or a service wrapping it (`h.stripeService`,
/// `paypalClient`), not on a database model named after the provider (`db.stripeCustomer`).
fn provider_client(call: &Call) -> bool {
    let segs = &call.callee[..call.callee.len().saturating_sub(1)];
    let db_root = segs.first().is_some_and(|r| {
        matches!(
            norm(r).as_str(),
            "db" | "prisma" | "tx" | "trx" | "knex" | "supabase" | "client" | "models"
        )
    });
    // `this.stripePaymentRepository.create(…)` is this application's table.
    let repository = segs.iter().any(|s| {
        has_any(
            s,
            &["repository", "repo", "model", "dao", "table", "collection"],
        )
    });
    let provider = |s: &String| PROVIDERS.iter().any(|p| norm(s).starts_with(p));
    let constant = |s: &String| s.chars().next().is_some_and(char::is_uppercase);
    // `StripeWebhooks::PerformedCallback.create`: an application's namespace named for the
    // provider holds the application's own model (the SDK's is `Stripe::Charge`).
    let app_namespace = |i: usize| {
        constant(&segs[i])
            // (`Stripe'2`: renamed in an inlined helper that assigned `Stripe.api_key`)
            && !PROVIDERS.contains(&norm(crate::ir::as_written(&segs[i])).as_str())
            && segs
                .get(i + 1)
                .is_some_and(|n| constant(n) && !provider(n))
    };
    !db_root
        && !repository
        && segs
            .iter()
            .enumerate()
            .any(|(i, s)| provider(s) && !app_namespace(i) && !app_model(s))
}

/// `SendgridEvent.create!(…)`, `StripeCharge.find_by(…)`: a class named for the provider and
/// something more is the application's model of what the provider sent; the SDK's classes sit
/// in the provider's namespace (`Stripe::Charge`) or are its client (`StripeClient`).
fn app_model(segment: &str) -> bool {
    let name = crate::ir::as_written(segment);
    let n = norm(name);
    let Some(rest) = PROVIDERS
        .iter()
        .find_map(|p| n.strip_prefix(p))
        .filter(|r| !r.is_empty())
    else {
        return false;
    };
    name.starts_with(|c: char| c.is_ascii_uppercase())
        && ![
            "client", "service", "api", "gateway", "sdk", "adapter", "manager",
        ]
        .iter()
        .any(|w| rest.ends_with(w))
}

/// A Go context argument (`ctx`, `r.Context()`, `context.Background()`).
pub(crate) fn is_context(e: &Expr) -> bool {
    match e {
        Expr::Path(p) => {
            p.len() == 1 && matches!(crate::ir::as_written(&p[0]), "ctx" | "context" | "c")
        }
        Expr::Call(c) => matches!(c.method().as_str(), "context" | "background" | "todo"),
        _ => false,
    }
}

/// Drizzle's `db.select(…).from(table)`: a look-up of `table` (its `where` follows as
/// another call of the chain).
fn drizzle_select(call: &Call) -> Option<Act> {
    let select = call.receiver.as_deref()?;
    if call.method() != "from"
        || select.method() != "select"
        || select.callee.len() != 2
        || select.receiver.is_some()
    {
        return None;
    }
    let root = select.callee[0].to_lowercase();
    if !has_any(&root, &["db", "tx", "trx", "drizzle"]) {
        return None;
    }
    let Some(Expr::Path(table)) = call.args.first() else {
        return None;
    };
    Some(Act::OrmRead {
        target: table.join("."),
    })
}

fn root_of(target: &str) -> String {
    target
        .split(['.', '['])
        .next()
        .unwrap_or(target)
        .to_string()
}

/// A Redis key's shape: its literal parts, holes as `?` (so `processed:${id}` matches itself).
fn key_shape(e: &Expr) -> String {
    match e {
        Expr::Path(p) => p.join("."),
        Expr::Binary { op, left, right } if op == "+" => {
            let part = |x: &Expr| x.string_text().unwrap_or_else(|| "?".into());
            part(left) + &part(right)
        }
        other => other.string_text().unwrap_or_default(),
    }
}

/// Django `F("balance") - amount`, SQLAlchemy `Account.balance + x`, Prisma
/// `{ increment: 1 }` as a keyword value.
fn relative_value(column: &str, v: &Expr) -> bool {
    match v {
        Expr::Binary { op, left, right } if op == "+" || op == "-" => {
            let refers = |e: &Expr| match e {
                Expr::Call(c) => {
                    c.method() == "f"
                        && c.args
                            .first()
                            .and_then(Expr::string_text)
                            .is_some_and(|s| norm(&s) == norm(column))
                }
                Expr::Path(p) => p.last().is_some_and(|s| norm(s) == norm(column)) && p.len() > 1,
                _ => false,
            };
            refers(left) || refers(right)
        }
        _ => false,
    }
}

/// Whether an expression compares an ordering column: `Model.version < v`, Prisma
/// `{ version: { lt: v } }`, Mongo `{ version: { $lt: v } }`.
pub(crate) fn expr_compares_order(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| match x {
        Expr::Binary { op, left, right } if matches!(op.as_str(), "<" | "<=" | ">" | ">=") => {
            let names = |e: &Expr| {
                e.words().iter().any(|w| {
                    crate::words::is_order_column(w) || crate::words::is_event_time_column(w)
                })
            };
            if names(left) || names(right) {
                found = true;
            }
        }
        Expr::Object { fields, .. } => {
            for (k, v) in fields {
                if (crate::words::is_order_column(k) || crate::words::is_event_time_column(k))
                    && let Expr::Object { fields: inner, .. } = v
                    && inner
                        .iter()
                        .any(|(op, _)| matches!(norm(op).as_str(), "lt" | "lte" | "gt" | "gte"))
                {
                    found = true;
                }
            }
        }
        _ => {}
    });
    found
}

/// The table key of a target, for comparing two acts.
pub(crate) fn same_target(a: &str, b: &str) -> bool {
    !a.is_empty() && table_key(a) == table_key(b)
}

/// A request built by a call given a creating HTTP method and then sent (a project's
/// `make_http_request(Method::POST, &url)?.json(&data).send()`, reqwest's
/// `client.request(Method::PUT, url)`).
fn built_with_creating_method(call: &Call) -> bool {
    let mut link = call.receiver.as_deref();
    while let Some(c) = link {
        let creating = c.args.iter().any(|a| {
            matches!(a, Expr::Path(p) if p.len() >= 2
                && p[p.len() - 2] == "Method"
                && matches!(p[p.len() - 1].as_str(), "POST" | "PUT" | "PATCH" | "DELETE"))
        });
        if creating {
            return true;
        }
        link = c.receiver.as_deref();
    }
    false
}
