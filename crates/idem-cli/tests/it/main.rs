//! Tests of the `idem` binary: each runs the built executable as a user would (arguments,
//! environment, exit codes, what it prints) against real databases, brokers and a local
//! application.

mod binary;
mod check_config;
mod consumers_cli;
mod consumers_list;
mod demo_console;
mod faults;
mod gateway_ops;
mod lint_inventory;
mod mysql_gateway;
mod nats_destination;
mod operator_cli;
mod relays;
mod reload;
mod serve_process;
mod support;
mod traces;
