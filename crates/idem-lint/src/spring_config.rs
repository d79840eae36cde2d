//! Spring Boot's consumer settings in `application.yml` / `application.properties` (and
//! their profile variants): a Kafka consumer with `enable-auto-commit: true` commits offsets
//! on a timer, a RabbitMQ listener with `acknowledge-mode: none` is acknowledged on receipt.
//! Each setting becomes an operation of the file's top level, at its line, in the shapes
//! `REL_ACK_BEFORE_COMMIT` reads from code (a consumer configuration object; a listener call
//! with `acknowledgeMode`). Read by a tolerant line reader of keys and values: the settings
//! needed are scalars. `ack-mode` (Spring Kafka) needs no finding of its own: in every mode
//! the container commits after the listener returns, and in the `manual` modes the listener's
//! `Acknowledgment.acknowledge()` is checked in the code.

use std::path::Path;

use crate::ir::{Call, Expr, Function, Module, Op, OpKind, Pos};
use crate::lang::MODULE;
use crate::words::norm;

/// Whether a file is a Spring Boot configuration file.
pub(crate) fn is_config(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    // Or a Spring Cloud Config repository's `{application}-{profile}.yml`, kept in a
    // folder named for the config server (`config-repo/`, `mmj-config/`).
    let config_repo = (path
        .parent()
        .and_then(Path::file_name)
        .and_then(|d| d.to_str()))
    .is_some_and(|d| d.to_lowercase().contains("config"));
    (name.starts_with("application") || name.starts_with("bootstrap") || config_repo)
        && matches!(ext, "yml" | "yaml" | "properties")
}

/// The settings of a configuration file: dotted keys with their values and positions.
fn settings(text: &str, yaml: bool) -> Vec<(String, String, Pos)> {
    let mut out = Vec::new();
    // The keys open at each indentation (YAML).
    let mut stack: Vec<(usize, String)> = Vec::new();
    // The indentation of a key whose value is a block scalar (`notes: |`): deeper lines are
    // its text, not settings.
    let mut block: Option<usize> = None;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim_start();
        if trimmed.is_empty() {
            continue;
        }
        let indent = raw.len() - trimmed.len();
        match block {
            Some(b) if indent > b => continue,
            _ => block = None,
        }
        if trimmed.starts_with('#') || trimmed.starts_with('!') {
            continue;
        }
        if trimmed.starts_with("---") {
            stack.clear();
            continue;
        }
        let split = if yaml {
            trimmed.split_once(':')
        } else {
            trimmed.split_once(['=', ':'])
        };
        let Some((key, value)) = split else { continue };
        let key = key.trim().trim_matches(['"', '\'']).to_string();
        let value = value.split(" #").next().unwrap_or("").trim();
        let value = value.trim_matches(['"', '\'']).to_string();
        let pos = Pos {
            line: i as u32 + 1,
            column: indent as u32 + 1,
        };
        if !yaml {
            out.push((key, value, pos));
            continue;
        }
        if value.starts_with(['|', '>']) {
            block = Some(indent);
        }
        while stack.last().is_some_and(|(d, _)| *d >= indent) {
            stack.pop();
        }
        let full = stack
            .iter()
            .map(|(_, k)| k.as_str())
            .chain(std::iter::once(key.as_str()))
            .collect::<Vec<_>>()
            .join(".");
        if value.is_empty() {
            stack.push((indent, key));
        } else {
            out.push((full, value, pos));
        }
    }
    out
}

/// The file's settings as the operations of its top level.
pub(crate) fn module(path: &Path, text: &str) -> Module {
    let yaml = path.extension().is_some_and(|e| e != "properties");
    let mut f = Function::new(MODULE.to_string());
    for (key, value, pos) in settings(text, yaml) {
        let n = norm(&key);
        let parent = key
            .rsplit_once('.')
            .map_or(String::new(), |(p, _)| p.to_string());
        // Kafka's setting only (`app.enable-auto-commit` is some other application's).
        let kafka = n.contains("kafka");
        let kind = if kafka && n.ends_with("enableautocommit") && value.eq_ignore_ascii_case("true")
        {
            // `spring.kafka.consumer.enable-auto-commit: true`, or the client property
            // `spring.kafka.consumer.properties.enable.auto.commit: true`.
            let parent = parent.trim_end_matches(".enable.auto").to_string();
            OpKind::Assign {
                targets: vec![parent],
                op: None,
                value: Expr::Object {
                    type_name: None,
                    fields: vec![("enable_auto_commit".into(), Expr::Path(vec!["true".into()]))],
                },
            }
        } else if n.ends_with("acknowledgemode") && n.contains("rabbit") {
            OpKind::Call(Call {
                callee: parent.split('.').map(str::to_string).collect(),
                receiver: None,
                args: Vec::new(),
                kwargs: vec![("acknowledgeMode".into(), Expr::Str(value))],
                is_new: false,
                pos,
            })
        } else {
            continue;
        };
        f.ops.push(Op {
            kind,
            pos,
            conds: Vec::new(),
            lexical_tx: None,
            origin: None,
            detached: 0,
        });
    }
    let mut module = Module::default();
    if !f.ops.is_empty() {
        module.functions.push(f);
    }
    module
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prose in a block scalar that reads like a setting, and a key that only ends like
    /// Kafka's, are no settings.
    #[test]
    fn block_scalars_and_other_keys_are_not_kafka_settings() {
        let yml = "app:\n  notes: |\n    enable-auto-commit: true\n    spring.kafka.consumer.enable-auto-commit: true\n  enable-auto-commit: true\nspring:\n  kafka:\n    consumer:\n      enable-auto-commit: true\n";
        let m = module(Path::new("application.yml"), yml);
        let lines: Vec<u32> = m
            .functions
            .iter()
            .flat_map(|f| &f.ops)
            .map(|o| o.pos.line)
            .collect();
        assert_eq!(lines, vec![9]);
    }

    #[test]
    fn yaml_and_properties() {
        let yml = "spring:\n  kafka:\n    consumer:\n      group-id: billing\n      enable-auto-commit: true\n  rabbitmq:\n    listener:\n      simple:\n        acknowledge-mode: none\n";
        let m = module(Path::new("application.yml"), yml);
        let lines: Vec<u32> = m.functions[0].ops.iter().map(|o| o.pos.line).collect();
        assert_eq!(lines, vec![5, 9]);
        let props = "spring.kafka.consumer.enable-auto-commit=false\nspring.kafka.consumer.properties.enable.auto.commit=true\n";
        let m = module(Path::new("application.properties"), props);
        assert_eq!(m.functions[0].ops.len(), 1);
        assert_eq!(m.functions[0].ops[0].pos.line, 2);
    }
}
