//! The hand-off from ingest to a destination's dispatcher: a fresh delivery that may go at once
//! is claimed in the very transaction that stores it (in flight, attempt 1, fencing token 1)
//! and handed over in memory after the commit, with its body. It is sent without a due query,
//! a read of its body or a claim transaction of its own: forwarding a fresh event costs the
//! outcome's write alone.
//!
//! A delivery is handed off when its destination's dispatcher runs, is not paused, has a free
//! slot (a claim it may hold: see `dispatch::Bounds`; an attempt starts once a permit is free)
//! and a token of its rate limit (the same slots, permits and tokens bound every attempt,
//! however it was claimed; see `throttle`), and, on a route that keeps entity order, no
//! delivery of its entity is pending or in flight (read in the same transaction, after the
//! version guard locked the entity's row, so a concurrent batch of the same entity commits first
//! and is seen). While ingest has stored deliveries pending that no due query has seen yet (a
//! backlog), a hand-off leaves the slots of one due query's batch free, so that the backlog,
//! claimed oldest first by due queries, drains beside the fresh deliveries. Everything else is
//! stored pending and claimed by the dispatcher's due query; one stored behind its entity's
//! open delivery is claimed when that delivery's attempt ends here (or at the next poll, when
//! another process sent it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use idem_core::Timestamp;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::throttle::Throttle;
use crate::store::DueDelivery;

/// A delivery claimed outside the dispatcher for attempt number `attempt` until `until` (ms),
/// with the slot and token it will be sent under.
pub(crate) struct Handed {
    pub delivery: DueDelivery,
    pub attempt: i64,
    pub until: i64,
    pub permit: Reserved,
    /// Who claimed it, for `idem_dispatch_claims_total`.
    pub path: Claimer,
}

/// Who claimed a handed delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claimer {
    /// Ingest, in the transaction that stored it.
    Ingest,
    /// The outcome writer, in the commit that ended its entity's previous delivery.
    Successor,
}

impl Claimer {
    /// The `path` label of `idem_dispatch_claims_total`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Ingest => "handoff",
            Self::Successor => "successor",
        }
    }
}

/// What [`Handoff::reserve`] takes for one delivery: one of the dispatcher's slots (see
/// `dispatch::Bounds`) and, with a rate limit, a token.
/// Dropped unsent (the delivery is stored pending after all, or its batch failed), both go
/// back.
#[derive(Debug)]
pub(crate) struct Reserved {
    permit: OwnedSemaphorePermit,
    token: Token,
}

impl Reserved {
    /// The slot the delivery is held under; the token is spent.
    pub(crate) fn start(self) -> OwnedSemaphorePermit {
        let Self { permit, mut token } = self;
        token.0 = None;
        permit
    }
}

/// A token taken from a throttle, given back when dropped unspent.
#[derive(Debug)]
struct Token(Option<Arc<Throttle>>);

impl Drop for Token {
    fn drop(&mut self) {
        if let Some(throttle) = self.0.take() {
            throttle.give_back(1);
        }
    }
}

/// The most entities [`Handoff::wait_for`] keeps (a few MiB at most).
const MAX_WAITING: usize = 10_000;

/// No due query has run yet: the store may hold a backlog from before the start.
const NEVER: u64 = u64::MAX;

/// One destination's side of the hand-off; see the module docs.
pub(crate) struct Handoff {
    /// The destination's pause and rate limit.
    throttle: Arc<Throttle>,
    /// Set while the destination's dispatcher runs.
    open: Mutex<Option<Open>>,
    /// Counts the commits that stored a delivery of this destination without handing it off.
    stored: AtomicU64,
    /// `stored` as it was when a due query last found fewer due deliveries than it asked for.
    caught_up: AtomicU64,
    /// The dispatcher was woken while too few permits were free to claim: the next attempt to
    /// end wakes it again.
    claim_owed: AtomicBool,
    /// Per (route, entity), the deliveries stored pending and not yet claimed here: while any
    /// waits, the end of an attempt of that entity wakes the dispatcher to claim the next.
    waiting: Mutex<HashMap<(String, String), u32>>,
}

/// A running dispatcher's end of the hand-off.
struct Open {
    queue: mpsc::UnboundedSender<Handed>,
    /// The dispatcher's slots: one per delivery claimed here and not yet sent.
    slots: Arc<Semaphore>,
    /// The free slots a hand-off leaves to the due queries while a backlog waits.
    floor: usize,
}

impl Handoff {
    /// A destination's hand-off under `throttle`, closed until a dispatcher opens it.
    pub(crate) fn new(throttle: Throttle) -> Self {
        Self {
            throttle: Arc::new(throttle),
            open: Mutex::new(None),
            stored: AtomicU64::new(0),
            caught_up: AtomicU64::new(NEVER),
            claim_owed: AtomicBool::new(false),
            waiting: Mutex::new(HashMap::new()),
        }
    }

    /// Opens the hand-off to a running dispatcher with `slots` (which bound the deliveries it
    /// holds, however claimed), leaving `floor` of them free for its due queries while a
    /// backlog waits: returns what ingest hands over.
    pub(crate) fn open(
        &self,
        slots: Arc<Semaphore>,
        floor: usize,
    ) -> mpsc::UnboundedReceiver<Handed> {
        let (queue, receiver) = mpsc::unbounded_channel();
        *self.open.lock().unwrap_or_else(PoisonError::into_inner) = Some(Open {
            queue,
            slots,
            floor,
        });
        receiver
    }

    /// Closes it (the dispatcher is stopping): from now on ingest stores deliveries pending.
    pub(crate) fn close(&self) {
        *self.open.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// The destination's pause and rate limit.
    pub(crate) fn throttle(&self) -> &Throttle {
        &self.throttle
    }

    /// A permit and token for a delivery ingest may claim as it stores it at `now`, or `None`
    /// when it must be stored pending: no dispatcher runs, the destination is paused, a backlog
    /// may be waiting, every permit is taken, or its rate limit has no token left.
    pub(crate) fn reserve(&self, now: Timestamp) -> Option<Reserved> {
        self.reserve_slot(now, true)
    }

    /// The same for the next delivery of an entity whose attempt just ended, which the outcome
    /// writer claims in the commit of that outcome: it is (or was) part of the backlog itself,
    /// so no slots are left for due queries.
    pub(crate) fn reserve_successor(&self, now: Timestamp) -> Option<Reserved> {
        self.reserve_slot(now, false)
    }

    fn reserve_slot(&self, now: Timestamp, leave_to_backlog: bool) -> Option<Reserved> {
        if self.throttle.paused() {
            return None;
        }
        let guard = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let open = guard.as_ref().filter(|open| !open.queue.is_closed())?;
        // While a backlog waits, fresh deliveries still go, in the slots the due queries leave
        // (events of other entities may overtake it; one of an entity with a delivery pending
        // is stored behind it): once the hand-off stopped until the backlog was gone, every
        // delivery went through due queries under steady load, which then fell behind.
        if leave_to_backlog && self.backlog() && open.slots.available_permits() <= open.floor {
            return None;
        }
        let permit = Arc::clone(&open.slots).try_acquire_owned().ok()?;
        drop(guard);
        let token = if self.throttle.is_limited() {
            (self.throttle.take(1, now) == 1).then(|| Token(Some(Arc::clone(&self.throttle))))?
        } else {
            Token(None)
        };
        Some(Reserved { permit, token })
    }

    /// Hands `handed`, claimed in a committed transaction, to the dispatcher. If the dispatcher
    /// has stopped meanwhile, the delivery stays claimed until its claim lapses and is then
    /// taken by a due query, like the delivery of a process that died.
    pub(crate) fn hand(&self, handed: Handed) {
        if let Some(open) = &*self.open.lock().unwrap_or_else(PoisonError::into_inner) {
            let _ = open.queue.send(handed);
        }
    }

    /// Ingest committed deliveries of this destination that it did not hand off (call after the
    /// commit, then wake the dispatcher): nothing is handed off until a due query has run.
    pub(crate) fn stored_pending(&self) {
        self.stored.fetch_add(1, Ordering::AcqRel);
    }

    /// A due query found fewer due deliveries than it asked for: it saw every one committed
    /// before it began, so whatever ingest stored until then is claimed (or held back by its
    /// entity's order, which the end of that entity's attempt wakes). Those committed while it
    /// ran are counted as seen too: each commit wakes the dispatcher after counting itself, so
    /// the next due query claims them, and under steady load a commit during every query no
    /// longer keeps the hand-off shut (every delivery then went through due queries).
    pub(crate) fn due_query_done(&self) {
        self.caught_up
            .store(self.stored.load(Ordering::Acquire), Ordering::Release);
    }

    /// Whether deliveries ingest stored pending may still wait for a due query to claim them.
    pub(crate) fn backlog(&self) -> bool {
        self.caught_up.load(Ordering::Acquire) != self.stored.load(Ordering::Acquire)
    }

    /// The dispatcher put off a claim until more permits are free.
    pub(crate) fn owe_claim(&self) {
        self.claim_owed.store(true, Ordering::Release);
    }

    /// Whether a claim was put off (it is no longer owed: the caller wakes the dispatcher).
    pub(crate) fn take_owed_claim(&self) -> bool {
        self.claim_owed.swap(false, Ordering::AcqRel)
    }

    /// Notes that a delivery of `entity` on `route` is being stored pending: it may wait behind
    /// an open one of its entity. Past [`MAX_WAITING`] entities nothing more is noted, and such a
    /// delivery is claimed at the next poll instead; a count goes when the deliveries it counts
    /// are claimed here (those another process claims leave theirs, which costs a wake-up).
    pub(crate) fn wait_for(&self, route: &str, entity: &str) {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (route.to_owned(), entity.to_owned());
        if let Some(count) = waiting.get_mut(&key) {
            *count = count.saturating_add(1);
        } else if waiting.len() < MAX_WAITING {
            waiting.insert(key, 1);
        }
    }

    /// A due query claimed the first attempt of a delivery of `entity` on `route` (one that
    /// ingest stored pending): one less waits.
    pub(crate) fn claimed(&self, route: &str, entity: &str) {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (route.to_owned(), entity.to_owned());
        if let Some(count) = waiting.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                waiting.remove(&key);
            }
        }
    }

    /// Whether a delivery of `entity` on `route` may wait for the attempt that just ended.
    pub(crate) fn is_waited_for(&self, route: &str, entity: &str) -> bool {
        let waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        !waiting.is_empty() && waiting.contains_key(&(route.to_owned(), entity.to_owned()))
    }
}
