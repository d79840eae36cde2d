//! Ruby's framework vocabulary: the classes and mixins that make a method a handler, the
//! block-taking calls that register a callback, open a transaction or run work later, and
//! the ActiveRecord and cache methods renamed to the words the language-neutral analysis
//! knows (`exists?` → `exists`, `Rails.cache.write(…, unless_exist: true)` → a `SET NX`).

/// Superclasses and mixins of background jobs and broker consumers (ActiveJob, Sidekiq,
/// Shoryuken, Sneakers, Hutch, Racecar, Karafka, Phobos, Faktory, Resque, Que, GoodJob,
/// Action Mailbox).
pub(super) const JOB_ANCESTORS: &[&str] = &[
    "job",
    "worker",
    "sidekiq",
    "shoryuken",
    "sneakers",
    "hutch",
    "racecar",
    "karafka",
    "phobos",
    "faktory",
    "resque",
    "consumer",
    "subscriber",
    "listener",
    "handler",
    // Action Mailbox: inbound mail, delivered (and redelivered) to `process`.
    "mailbox",
];

/// Words in a controller's or action's name that say it receives a provider's deliveries.
pub(super) const WEBHOOK_WORDS: &[&str] = &[
    "webhook",
    "hook",
    "ipn",
    "notify",
    "stripe",
    "github",
    "gitlab",
    "shopify",
    "paypal",
    "braintree",
    "razorpay",
    "paddle",
    "adyen",
    "mollie",
    "twilio",
    "sendgrid",
    "mailgun",
    "postmark",
    "slack",
    "plaid",
    "lemonsqueezy",
    "svix",
    "clerk",
    "intercom",
    "hubspot",
    "calendly",
    "docusign",
    "zoom",
    "square",
    "coinbase",
    "mercadopago",
    "pagseguro",
    "chargebee",
    "recurly",
    "revenuecat",
    "incoming",
    "inbound",
];

/// Methods through which a job or consumer class receives its work.
pub(super) const JOB_ENTRIES: &[&str] = &[
    "perform",
    "work",
    "work_with_params",
    "consume",
    "process",
    "process_batch",
    "call",
    "handle",
    "on_message",
    "receive",
];

/// Calls whose block is a callback the caller registers: a broker subscription, a consumer
/// loop, a Sinatra route, a notification subscriber.
pub(super) const REGISTERS_BLOCK: &[&str] = &[
    "subscribe",
    "subscribe_with",
    "each_message",
    "each_batch",
    "consume",
    "on_message",
    "on_delivery",
    "message_handler",
    "listen",
    "handle",
    "on",
    "post",
    "put",
    "patch",
    "delete",
    "get",
    "route",
    "task",
    "define_method",
];

/// Sinatra and Roda route verbs, written without a receiver.
pub(super) const ROUTE_VERBS: &[&str] = &["post", "put", "patch", "delete", "get", "route"];

/// Calls whose block runs after the caller has gone on: `Thread.new`, `Thread.start`,
/// `Fiber.new`, `Concurrent::Future.execute`, `Concurrent::Promises.future`, `Async do … end`,
/// `fork`. (`Thread.new` is lowered as a construction of `Thread`.)
pub(super) fn runs_detached(call: &crate::ir::Call) -> bool {
    let root = call.callee.first().map(String::as_str).unwrap_or("");
    let m = call.callee.last().map(String::as_str).unwrap_or("");
    call.is_new && matches!(root, "Thread" | "Fiber")
        || matches!(root, "Thread" | "Concurrent")
            && matches!(m, "start" | "fork" | "future" | "execute")
        || call.callee.len() == 1 && matches!(m, "fork" | "Async")
}

/// Calls whose block runs inside a database transaction: `ActiveRecord::Base.transaction`,
/// `Order.transaction(requires_new: true)`, `account.with_lock`, `lock!` chains.
pub(super) fn opens_transaction(method: &str) -> bool {
    matches!(
        method,
        "transaction" | "with_lock" | "with_transaction" | "transaction_with_retry"
    )
}

/// Calls whose block runs once the transaction commits (`after_commit` of the
/// after_commit_everywhere gem, `ActiveRecord.after_all_transactions_commit`).
pub(super) fn runs_after_commit(method: &str) -> bool {
    matches!(
        method,
        "after_commit" | "after_all_transactions_commit" | "after_transaction_commit"
    )
}

/// Methods called without arguments for what they do, not for a value: even as a value
/// (`ok = order.save`) they stay calls. `to_json` re-serialises (what a signature check over
/// it gets wrong), so it stays a call too.
pub(super) fn acts(method: &str) -> bool {
    persists_self(method)
        || matches!(
            method,
            "to_json"
                | "delete"
                | "reload"
                | "publish"
                | "deliver"
                | "deliver_now"
                | "deliver_later"
                | "perform"
                | "perform_now"
                | "perform_later"
                | "call"
                | "process"
                | "run"
                | "execute"
                | "ack"
                | "nack"
                | "reject"
                | "commit"
                | "rollback"
                | "retrieve"
                | "first"
                | "last"
                | "take"
                | "count"
                | "exists"
                | "lock"
                | "pop"
                | "shift"
                // A payment's verbs: `charge.refund`, `payment_intent.capture`.
                | "refund"
                | "capture"
                | "cancel"
                | "void"
        )
}

/// ActiveRecord instance methods that write (or lock) the row they are called on.
pub(super) fn persists_self(method: &str) -> bool {
    matches!(
        method,
        "save"
            | "save!"
            | "update"
            | "update!"
            | "update_columns"
            | "update_column"
            | "update_attribute"
            | "increment!"
            | "decrement!"
            | "toggle!"
            | "touch"
            | "destroy"
            | "destroy!"
            | "with_lock"
            | "lock!"
    )
}

/// Methods whose block is given the elements of the receiver, one by one.
pub(super) fn iterates(method: &str) -> bool {
    method.starts_with("each")
        || method.ends_with("_each")
        || matches!(
            method,
            "map"
                | "flat_map"
                | "collect"
                | "select"
                | "filter"
                | "filter_map"
                | "reject"
                | "find"
                | "detect"
                | "find_in_batches"
                | "in_batches"
                | "group_by"
                | "partition"
                | "sort_by"
                | "min_by"
                | "max_by"
                | "sum"
                | "count"
                | "any"
                | "all"
                | "none"
                | "inject"
                | "reduce"
                | "tap"
                | "then"
                | "yield_self"
                | "index_by"
                | "to_h"
                | "zip"
                | "with_index"
                | "with_object"
        )
}

/// ActiveRecord methods that look a row up and create it when missing: a SELECT then an
/// INSERT, which only a unique index referees.
pub(super) fn finds_or_creates(method: &str) -> bool {
    matches!(
        method,
        "find_or_create_by" | "find_or_create_by!" | "first_or_create" | "first_or_create!"
    )
}

/// Predicates on a relation that ask whether a row exists (`where(…).any?`).
pub(super) fn asks_existence(method: &str) -> bool {
    matches!(
        method,
        "any?" | "present?" | "none?" | "empty?" | "blank?" | "exist?" | "exists?"
    )
}

/// `UserMailer.welcome(user).deliver`: ActionMailer's `deliver` of Rails before 4.2, the mail
/// sent now as `deliver_now` sends it.
pub(super) fn mail_delivered_now(method: &str, receiver: &[String]) -> bool {
    matches!(method, "deliver" | "deliver!") && receiver.iter().any(|s| s.ends_with("Mailer"))
}

/// `WaterDrop::SyncProducer.call(payload, topic: "tasks")` (WaterDrop before 2.0, also its
/// `AsyncProducer` and `BatchSyncProducer`): a producer class called with a topic sends to it.
/// The class must be WaterDrop's (`WaterDrop::SyncProducer`): a project's own
/// `Crm::SyncProducer.call(contact, topic: :contact)` may build a payload and send nothing.
pub(super) fn producer_class_called(method: &str, receiver: &[String], topic: bool) -> bool {
    method == "call"
        && topic
        && receiver.iter().any(|s| s == "WaterDrop")
        && receiver
            .last()
            .is_some_and(|s| s.ends_with("Producer") && s.starts_with(char::is_uppercase))
}

/// Methods renamed for the analysis: ActiveRecord counters (`update_counters`,
/// `increment_counter`) are increments, `insert_all` skips duplicates (`ON CONFLICT DO
/// NOTHING`), and a cache's `read`/`write`/`exist?` are a key-value store's get/set/exists.
pub(super) fn canonical(method: &str, on_cache: bool) -> String {
    let m = match method {
        "update_counters" | "increment_counter" | "increment!" => "increment",
        "decrement_counter" | "decrement!" => "decrement",
        "insert_all" | "insert" => "insert_or_ignore",
        "upsert_all" => "upsert",
        "read" | "fetch" if on_cache => "get",
        "write" if on_cache => "set",
        "exist?" => "exists",
        "increment" if on_cache => "incr",
        "decrement" if on_cache => "decr",
        "delete" if on_cache => "del",
        other => other,
    };
    m.trim_end_matches(['!', '?']).to_string()
}
