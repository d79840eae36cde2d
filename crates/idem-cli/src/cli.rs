//! The command line: `idem [--config FILE] COMMAND`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// idem: takes signed webhooks, deduplicates them durably, forwards them in entity order with
/// retries.
#[derive(Debug, Parser)]
#[command(name = "idem", version)]
pub(crate) struct Cli {
    /// The configuration file (TOML). Without it: built-in defaults, SQLite under ./idem-data.
    #[arg(long, short, global = true)]
    pub config: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Refuses the argument combinations clap's attributes cannot express: `effects resolve
    /// --outcome` without `--succeeded` (a `requires = "succeeded"` would always be met, a bool
    /// flag being present as `false`), which would silently drop the outcome.
    ///
    /// # Errors
    /// A clap error naming the arguments; `exit()` on it prints it with the usage and exits 2,
    /// as for every other argument error.
    pub(crate) fn check(&self) -> Result<(), clap::Error> {
        if let Command::Effects(LedgerArgs {
            command:
                EffectsCommand::Resolve {
                    succeeded: false,
                    outcome: Some(_),
                    retry,
                    ..
                },
            ..
        }) = &self.command
        {
            let other = if *retry { "--retry" } else { "--failed" };
            return Err(<Self as clap::CommandFactory>::command().error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "--outcome goes with --succeeded only: {other} stores no outcome, so it would be lost"
                ),
            ));
        }
        Ok(())
    }

    /// The log filter when `RUST_LOG` is not set: quiet for the demo (its table is the output);
    /// sqlx's statement and NOTICE lines only from WARN.
    pub(crate) fn log_filter(&self) -> &'static str {
        match self.command {
            Command::Demo { .. } => "warn,idem_gateway::dispatch=error",
            Command::Verify(_) => "warn",
            _ => "info,sqlx=warn",
        }
    }
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the gateway until SIGTERM or Ctrl-C, then drain and exit 0.
    Serve {
        /// Refuse to start when the configuration has warnings (a source no route leaves, an
        /// event_types pattern matching none of its sender's known types).
        #[arg(long)]
        strict: bool,
    },
    /// Run the whole pipeline on the shipped payloads, with no set-up, and check the result
    /// (on its own SQLite database in a temporary directory: it takes no --config).
    Demo {
        /// Keep the demo's gateway running afterwards, with its web console on, and print the
        /// console's URL and a token made for this run; Ctrl-C stops it.
        #[arg(long)]
        console: bool,
    },
    /// Check the configuration (secrets, retention against redelivery horizons) and exit,
    /// without opening the database unless --database; warnings (a source no route leaves, an
    /// event_types pattern matching none of its sender's known types) are printed.
    CheckConfig {
        /// Exit 1 when there are warnings.
        #[arg(long)]
        strict: bool,
        /// Also open the configured database (never creating it) and check what `idem serve`
        /// checks there at start: a stored route name with open deliveries or version-guard
        /// rows that no route has, renames (renamed_from) or retires exits 1.
        #[arg(long)]
        database: bool,
    },
    /// Stored events.
    #[command(subcommand)]
    Events(EventsCommand),
    /// Dead letters.
    #[command(subcommand)]
    Dlq(DlqCommand),
    /// Destinations: list them, pause one (its deliveries wait, nothing is attempted or
    /// dead-lettered) and resume it, for every gateway process on the database.
    #[command(subcommand)]
    Destination(DestinationCommand),
    /// Send a source's events of a time range again (new attempts, same Idempotency-Key).
    Replay(ReplayArgs),
    /// Delete what the retention no longer needs (inbox keys, finished events, old bodies).
    Gc,
    /// Redeliver events to a handler with duplicates, concurrency, reordering, lost acks and
    /// late replays, and check that its final state does not change; on a difference, print a
    /// minimal failing sequence. Takes no --config.
    ///
    /// Exit codes: 0 = every mode matched the baseline; 1 = a finding (a mode diverged, ran
    /// out of budget or was skipped; with --replay: the sequence diverges); 3 = the run could
    /// not be done (bad argument values, unreadable events, target unreachable, a failed
    /// --reset, --state or --restart, --state empty or unstable, the baseline mostly rejected);
    /// 2 = the command line was refused (a missing or unknown argument).
    Verify(Box<VerifyArgs>),
    /// The effect ledger (`idem_effects`): list, show and resolve effects, such as the parked
    /// and dead ones an operator must reconcile with the provider.
    Effects(LedgerArgs<EffectsCommand>),
    /// The transactional outbox (`idem_outbox`): list and show rows, requeue or discard parked
    /// ones.
    Outbox(LedgerArgs<OutboxCommand>),
    /// Broker consumers' dead letters (`idem_dead_letters`), including the broker messages the
    /// gateway could not read as events: list, show, delete.
    DeadLetters(LedgerArgs<DeadLettersCommand>),
    /// The consumer inventory (`idem_consumers`): list every consumer with its counts, lag and
    /// flags, show one; reset one's cursor rows (`idem_inbox`, `idem_versions`, `idem_parked`,
    /// `idem_kafka_offsets`) for a rebuild.
    Consumers(LedgerArgs<ConsumersCommand>),
    /// Find non-idempotent handler code (TypeScript/JavaScript, Python, Go): runs the
    /// `idem-lint` program installed beside `idem` or on PATH with these arguments (`idem lint
    /// --help` for its options; `cargo install --path crates/idem-lint` installs it). `idem lint
    /// --inventory --database URL` lists the handlers joined with the consumer registry at URL
    /// (read here, passed to idem-lint as `--registry -`).
    #[command(disable_help_flag = true)]
    Lint {
        /// Everything after `lint`, passed to `idem-lint` as it is.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

/// `idem effects|outbox|dead-letters [--database URL] …`: the command, and where idem's own
/// tables are.
#[derive(Debug, clap::Args)]
pub(crate) struct LedgerArgs<C: Subcommand> {
    /// The database holding idem's tables (`sqlite://…` or `postgres://…`): usually the
    /// application's. Default: the configuration's database_url. Never created or migrated here.
    #[arg(long, global = true, value_name = "URL")]
    pub database: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: C,
}

/// An effect status, as `--status` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum EffectStatusArg {
    /// Waiting for its first or next attempt.
    Pending,
    /// A worker is calling the provider.
    Running,
    /// The last call's result is unknown; retried with the same key.
    Unknown,
    /// Finished: the provider succeeded.
    Succeeded,
    /// Finished: resolved as failed.
    Failed,
    /// Unknown past the provider's key retention: waits for an operator.
    Parked,
    /// Failed past the retry policy: waits for an operator.
    Dead,
}

/// `idem effects …`
#[derive(Debug, Subcommand)]
pub(crate) enum EffectsCommand {
    /// Effects in one status, least recently changed first; without --status, the parked and
    /// the dead ones (those waiting for an operator).
    List {
        /// Only effects in this status.
        #[arg(long, value_enum)]
        status: Option<EffectStatusArg>,
        /// At most this many (per status).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Print them as a JSON array (times in RFC 3339 UTC), for scripts.
        #[arg(long)]
        json: bool,
    },
    /// One effect, as JSON: key, effect, status, attempts, request, outcome, last error, times.
    Show {
        /// The effect key.
        key: String,
        /// Print it as JSON (what this command prints anyway; accepted as on every list and
        /// show command, for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Resolve a parked or dead effect after reconciling with the provider: exactly one of
    /// --succeeded, --failed REASON, --retry.
    #[command(group(clap::ArgGroup::new("resolution").required(true).args(["succeeded", "failed", "retry"])))]
    Resolve {
        /// The effect key.
        key: String,
        /// The effect did happen: store --outcome and finish it as succeeded.
        #[arg(long)]
        succeeded: bool,
        /// With --succeeded only (refused with --failed or --retry): the outcome, inline JSON
        /// or @FILE (the file's bytes as they are); default empty.
        #[arg(long, value_name = "JSON|@FILE")]
        outcome: Option<String>,
        /// The effect did not happen and must not: finish it as failed with this reason.
        #[arg(long, value_name = "REASON")]
        failed: Option<String>,
        /// Run it again with the same key (back to pending, attempts reset). For a parked
        /// effect, only after checking that the provider did not take the call.
        #[arg(long)]
        retry: bool,
    },
}

/// An outbox row status, as `--status` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OutboxStatusArg {
    /// Not yet confirmed by the target.
    Pending,
    /// Confirmed and marked.
    Published,
    /// Failed every allowed attempt: waits for an operator.
    Parked,
}

/// `idem outbox …`
#[derive(Debug, Subcommand)]
pub(crate) enum OutboxCommand {
    /// Rows in one status (default parked), oldest first.
    List {
        /// Only rows in this status.
        #[arg(long, value_enum, default_value = "parked")]
        status: OutboxStatusArg,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Print them as a JSON array (times in RFC 3339 UTC), for scripts.
        #[arg(long)]
        json: bool,
    },
    /// One row, as JSON.
    Show {
        /// The message id.
        message_id: String,
        /// Print it as JSON (what this command prints anyway; accepted as on every list and
        /// show command, for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Put a parked row back to pending, due now, attempts reset: a running relay publishes it
    /// with the same message id.
    Requeue {
        /// The message id.
        message_id: String,
    },
    /// Delete a parked row, never to be published (unblocks the later rows of its aggregate).
    Discard {
        /// The message id.
        message_id: String,
    },
}

/// `idem dead-letters …`
#[derive(Debug, Subcommand)]
pub(crate) enum DeadLettersCommand {
    /// A consumer's dead letters, oldest first.
    List {
        /// The consumer (a versioned name such as billing_v2); default the gateway's,
        /// idem-gateway.
        #[arg(long, default_value = "idem-gateway")]
        consumer: String,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Print them as a JSON array (times in RFC 3339 UTC), for scripts.
        #[arg(long)]
        json: bool,
    },
    /// One dead letter, as JSON, with its headers and payload.
    Show {
        /// The id `dead-letters list` shows.
        id: i64,
        /// Print it as JSON (what this command prints anyway; accepted as on every list and
        /// show command, for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Delete a dead letter (after its event was redriven or discarded).
    Delete {
        /// The id `dead-letters list` shows.
        id: i64,
    },
}

/// `idem consumers …`
#[derive(Debug, Subcommand)]
pub(crate) enum ConsumersCommand {
    /// Every consumer in the registry, by name: kind, first and last seen, the last 24 hours'
    /// claimed, duplicates (repeat rate), stale, gaps and dead letters, lag and flags
    /// (superseded, orphaned, unhealthy; docs/consumers.md). On a gateway's database its
    /// sources, destinations and Kafka cursors carry the gateway's counts (the Kafka cursors
    /// are matched with their sources by the configuration: give -c).
    List {
        /// Only consumers first seen since: a duration ago (`90d`, `12h`), RFC 3339
        /// (`2026-01-31T12:00:00Z`) or milliseconds since the epoch.
        #[arg(long)]
        since: Option<String>,
        /// Print them as a JSON array (times in ms since the epoch), for scripts.
        #[arg(long)]
        json: bool,
    },
    /// One consumer: every window (1 h, 24 h, 30 d), its effects and outbox rows by status,
    /// what it holds, its successor and its flags with their reasons. An unknown name lists
    /// the known ones and exits 1.
    Show {
        /// The consumer's name.
        name: String,
        /// Print it as JSON (times in ms since the epoch), for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Delete a stopped consumer's inbox keys, version-guard rows, parked markers and stored
    /// Kafka offsets in one transaction, so that it reads its history again from the start
    /// (never its effects, outbox rows, dead letters or lineage, nor another consumer's rows).
    /// Refused while the consumer is live (a lease held, or a row written within the last
    /// minute), for the gateway's own consumers, and for an unknown name (the known ones are
    /// listed). Without --yes it prints what it would delete and exits 1.
    Reset {
        /// The consumer (a versioned name such as billing_v1).
        name: String,
        /// Count what would be deleted, delete nothing (needs no --yes).
        #[arg(long)]
        dry_run: bool,
        /// Delete: the confirmation a reset needs.
        #[arg(long)]
        yes: bool,
        /// Print the report as JSON (times in RFC 3339 UTC), for scripts.
        #[arg(long)]
        json: bool,
    },
}

/// `idem verify …`
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// The events: JSONL, one delivery per line (the body, or {"body", "headers", "id"}), or a
    /// directory of payload files.
    #[arg(long, required_unless_present = "replay", conflicts_with = "replay")]
    pub events: Option<PathBuf>,
    /// Replay a minimal sequence written by an earlier run (idem-verify-MODE.jsonl) and compare
    /// it with the in-order run of its events, instead of running the modes.
    #[arg(long)]
    pub replay: Option<PathBuf>,
    /// The handler's HTTP endpoint.
    #[arg(long)]
    pub target: String,
    /// How each copy is signed: none, or stripe:, github:, shopify:, standard-webhooks:
    /// followed by the secret. Fresh timestamp per copy, one event id per event.
    #[arg(long, default_value = "none")]
    pub sign: String,
    /// Shell command that returns the handler's state to empty.
    #[arg(long)]
    pub reset: String,
    /// Shell command that prints the handler's state (JSON or text).
    #[arg(long)]
    pub state: String,
    /// Comma-separated modes: duplicate, concurrent, shuffle, lost-ack, crash, replay-later,
    /// rebuild (default: all; crash only with --restart, rebuild only with --successor).
    #[arg(long)]
    pub modes: Option<String>,
    /// Shell command that kills and restarts the target, keeping its state (crash mode): it
    /// may return before the target answers (verify polls the target for up to 30 s), and a
    /// server it starts in the background must not keep its output open.
    #[arg(long)]
    pub restart: Option<String>,
    /// Shell command that moves the target to its next consumer version (billing_v2
    /// succeeding billing_v1), keeping its state (rebuild mode): rebuild delivers the history,
    /// runs it, delivers the same history again and expects the baseline's state, effects
    /// included. --reset must return the target to its first version too.
    #[arg(long)]
    pub successor: Option<String>,
    /// Shuffle keeps each entity's events in file order (interleaving entities only), for
    /// handlers that do not claim to handle reordering within an entity.
    #[arg(long)]
    pub keep_entity_order: bool,
    /// Seed of every schedule: the same seed gives the same deliveries.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Time limit of the whole run (`90s`, `2m`), shrinking included; greater than 0.
    #[arg(long, default_value = "2m")]
    pub budget: String,
    /// Write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// A JSON key left out of the states before comparing (surrogate ids, timestamps);
    /// repeatable.
    #[arg(long)]
    pub ignore: Vec<String>,
    /// Directory for the minimal sequences (idem-verify-MODE.jsonl).
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
}

/// `idem events …`
#[derive(Debug, Subcommand)]
pub(crate) enum EventsCommand {
    /// The newest events.
    List {
        /// Only this source's.
        #[arg(long)]
        source: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Only events no route took (stored, sent nowhere): `idem replay --backfill` sends
        /// them once a route takes them.
        #[arg(long)]
        unrouted: bool,
        /// Print them as a JSON array (times in RFC 3339 UTC), for scripts.
        #[arg(long)]
        json: bool,
    },
    /// One event with its deliveries and every attempt.
    Show {
        /// The source.
        source: String,
        /// The event id.
        event_id: String,
        /// Print it as JSON (what this command prints anyway; accepted as on every list and
        /// show command, for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Send one stored event again (new attempts, same Idempotency-Key), by replay's order
    /// rules: what a provider's own "resend" cannot do (its copy is a duplicate, not forwarded).
    Resend {
        /// The source.
        source: String,
        /// The event id.
        event_id: String,
        /// On drop-stale routes, send it even when stale or older than its entity's newest
        /// delivered event.
        #[arg(long)]
        force: bool,
        /// Count what would be sent; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// `idem dlq …`
#[derive(Debug, Subcommand)]
pub(crate) enum DlqCommand {
    /// Dead letters, oldest first.
    List {
        /// Only this destination's.
        #[arg(long)]
        destination: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Print them as a JSON array (times in RFC 3339 UTC), for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Make dead letters due again with a fresh retry schedule.
    Redrive {
        /// Only this destination's.
        #[arg(long)]
        destination: Option<String>,
        /// Only these deliveries (the ids `dlq list` shows): `--id 4 --id 7` or `--id 4,7`; an
        /// id that is not a dead letter is an error, and nothing is redriven.
        #[arg(long, value_delimiter = ',')]
        id: Vec<i64>,
        /// On drop-stale routes, also redrive dead letters older than their entity's newest
        /// delivered event (refused without it, to keep entity order).
        #[arg(long)]
        force: bool,
        /// Count what would be redriven; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// `idem destination …`
#[derive(Debug, Subcommand)]
pub(crate) enum DestinationCommand {
    /// The configured destinations, with whether each is paused and its rate limit.
    List {
        /// Print them as a JSON array (times in RFC 3339 UTC), for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Pause a destination: no gateway process on the database claims its deliveries until it
    /// is resumed (a running `idem serve` notices within a second, or its poll_interval if
    /// shorter); ingest goes on accepting events.
    Pause {
        /// The destination's name.
        name: String,
    },
    /// Resume a paused destination: its waiting deliveries are sent in entity order.
    Resume {
        /// The destination's name.
        name: String,
    },
}

/// `idem replay …`
#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// The source whose events are sent again.
    #[arg(long)]
    pub source: String,
    /// From this time: a duration ago (`2h`, `3d`), RFC 3339 (`2026-01-31T12:00:00Z`) or
    /// milliseconds since the epoch.
    #[arg(long)]
    pub since: String,
    /// Up to this time (same forms); default now.
    #[arg(long)]
    pub until: Option<String>,
    /// Only events of this type: an exact type (`invoice.paid`) or a prefix ending in `*`
    /// (`invoice.*`).
    #[arg(long = "type", value_name = "TYPE")]
    pub event_type: Option<String>,
    /// Count what would be sent; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// On drop-stale routes, also send events older than their entity's newest.
    #[arg(long)]
    pub force: bool,
    /// Instead of sending existing deliveries again, give the stored events of the range a
    /// delivery on each route of today's configuration that takes them and has none of them
    /// (a route added or fixed after they arrived), through the version guard as a new event's.
    #[arg(long, conflicts_with = "force")]
    pub backfill: bool,
    /// Rebuild the consumer behind --destination: send it EVERY stored event of the range
    /// (delivered ones, stale ones, those with no delivery there yet) with the header
    /// `Idem-Replay: rebuild`, one delivery per entity at a time in the entity's version order,
    /// under each event's own Idempotency-Key. Refused while a delivery of the range to the
    /// destination is pending or in flight, and when a body was dropped (unless
    /// --skip-missing-bodies).
    #[arg(long, conflicts_with_all = ["force", "backfill"], requires = "destination")]
    pub rebuild: bool,
    /// With --rebuild: the destination rebuilt; a route of --source must lead to it.
    #[arg(long, requires = "rebuild")]
    pub destination: Option<String>,
    /// With --rebuild: skip (and count) the events whose body body_retention dropped instead of
    /// refusing the rebuild.
    #[arg(long, requires = "rebuild")]
    pub skip_missing_bodies: bool,
    /// Print the report as JSON, for scripts.
    #[arg(long)]
    pub json: bool,
}
