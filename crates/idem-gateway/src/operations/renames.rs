//! Route renames at `idem serve`'s start (issue 32, 2): a route's `renamed_from` carries the
//! former name's stored deliveries and version-guard rows over to the new name, once (a second
//! start finds nothing left under the former name and changes nothing); a stored route name the
//! configuration lacks, with open deliveries or guard rows, is refused unless it is listed in
//! `retired_routes`: its events' order would be judged afresh under another name.

use serde::Serialize;

use crate::Error;
use crate::config::Config;
use crate::gateway::Gateway;
use crate::store::GatewayDb;

/// What [`Gateway::apply_route_renames`] carried over for one renamed route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteCarried {
    /// The former name (`renamed_from`).
    pub from: String,
    /// The route's name now.
    pub to: String,
    /// Deliveries moved, in every state.
    pub deliveries: u64,
    /// Version-guard rows moved (or merged into the new name's).
    pub guard_rows: u64,
}

/// A route name the database holds open deliveries (pending, in flight, dead) or guard rows of
/// that no route of the configuration has, nor its `renamed_from`, nor `retired_routes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnconfiguredRoute {
    /// The stored name.
    pub route: String,
    /// The destination of its open deliveries, when it has some.
    pub destination: Option<String>,
    /// Its deliveries pending, in flight or dead.
    pub open: u64,
    /// Its version-guard rows.
    pub guard_rows: u64,
}

impl std::fmt::Display for UnconfiguredRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "route {:?} has ", self.route)?;
        match (self.open, self.guard_rows) {
            (0, rows) => write!(f, "{rows} version-guard rows")?,
            (open, 0) => write!(f, "{open} open deliveries (pending, in flight or dead)")?,
            (open, rows) => write!(
                f,
                "{open} open deliveries (pending, in flight or dead) and {rows} version-guard rows"
            )?,
        }
        let to = self
            .destination
            .as_ref()
            .map(|d| format!(" (the one to destination {d:?})"))
            .unwrap_or_default();
        write!(
            f,
            " in the database but is not configured: if it was renamed, add renamed_from = {:?} \
             to the [[route]] that replaced it{to}, so its deliveries and entity order carry \
             over; if it was removed for good, list it in retired_routes = [{:?}]",
            self.route, self.route
        )
    }
}

impl<DB: GatewayDb> Gateway<DB> {
    /// Carries each renamed route's stored deliveries and version-guard rows over from its
    /// `renamed_from` (in one transaction per route; nothing to carry is no change), then
    /// refuses a stored route name the configuration lacks.
    ///
    /// # Errors
    /// [`Error::RouteRename`] when a former name's deliveries go to another destination than
    /// the renamed route's (nothing carried for it), or when the database holds open
    /// deliveries or guard rows of a route name that is not configured, renamed or retired;
    /// [`Error::Store`].
    pub async fn apply_route_renames(&self) -> Result<Vec<RouteCarried>, Error> {
        let mut carried = Vec::new();
        for route in &self.config().routes {
            let Some(old) = &route.renamed_from else {
                continue;
            };
            let mut tx = self.store().begin().await?;
            let destinations = DB::route_destinations(&mut tx, old.as_str()).await?;
            if let Some((other, _)) = destinations
                .iter()
                .find(|(d, _)| d.as_str() != route.destination.as_str())
            {
                return Err(Error::RouteRename {
                    route: route.name.to_string(),
                    reason: format!(
                        "renamed_from = {:?}: that route's deliveries went to destination {other:?}, this route's go to {:?}; a rename keeps the destination (a route to another destination is a new route: remove renamed_from, and list {:?} in retired_routes once its open deliveries are done or to leave them as they are)",
                        old.as_str(),
                        route.destination.as_str(),
                        old.as_str()
                    ),
                });
            }
            let (deliveries, guard_rows) =
                DB::carry_route(&mut tx, old.as_str(), route.name.as_str()).await?;
            tx.commit().await.map_err(idem_sql::Error::from)?;
            if deliveries + guard_rows > 0 {
                tracing::info!(
                    from = old.as_str(),
                    to = route.name.as_str(),
                    deliveries,
                    guard_rows,
                    "route renamed: its deliveries and version-guard rows carried over"
                );
                carried.push(RouteCarried {
                    from: old.to_string(),
                    to: route.name.to_string(),
                    deliveries,
                    guard_rows,
                });
            }
        }
        if let Some(stray) = self.unconfigured_routes().await?.into_iter().next() {
            return Err(Error::RouteRename {
                route: stray.route.clone(),
                reason: stray.to_string(),
            });
        }
        Ok(carried)
    }

    /// Stored route names with open deliveries (pending, in flight, dead) or version-guard rows
    /// that no configured route has (as its name or `renamed_from`) and `retired_routes` does not
    /// list, by name.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub async fn unconfigured_routes(&self) -> Result<Vec<UnconfiguredRoute>, Error> {
        self.unconfigured_routes_in(&self.config()).await
    }

    /// As [`unconfigured_routes`](Self::unconfigured_routes), for `config` rather than the
    /// running configuration (a reload checks the file it would apply).
    ///
    /// # Errors
    /// [`Error::Store`].
    pub(crate) async fn unconfigured_routes_in(
        &self,
        config: &Config,
    ) -> Result<Vec<UnconfiguredRoute>, Error> {
        let known = |name: &str| {
            config.routes.iter().any(|r| {
                r.name.as_str() == name
                    || r.renamed_from.as_ref().is_some_and(|o| o.as_str() == name)
            }) || config.retired_routes.iter().any(|r| r.as_str() == name)
        };
        let mut conn = self.store().pool().acquire().await?;
        let mut stray = std::collections::BTreeMap::<String, UnconfiguredRoute>::new();
        for (route, destination, open) in DB::open_routes(&mut conn).await? {
            if known(&route) {
                continue;
            }
            let entry = stray.entry(route.clone()).or_insert(UnconfiguredRoute {
                route,
                destination: Some(destination),
                open: 0,
                guard_rows: 0,
            });
            entry.open += u64::try_from(open).unwrap_or_default();
        }
        for consumer in DB::guard_consumers(&mut conn).await? {
            if known(&consumer) {
                continue;
            }
            let rows = DB::gateway_guard_rows(&mut conn, &consumer).await?;
            if rows == 0 {
                continue;
            }
            stray
                .entry(consumer.clone())
                .or_insert(UnconfiguredRoute {
                    route: consumer,
                    destination: None,
                    open: 0,
                    guard_rows: 0,
                })
                .guard_rows = u64::try_from(rows).unwrap_or_default();
        }
        Ok(stray.into_values().collect())
    }
}
