//! `SEC_SIG_PARSED_BODY`: a webhook signature verified over a parsed or re-serialised body
//! (`JSON.stringify(req.body)`, `json.dumps(payload)`, `json.Marshal(evt)`, `await
//! request.json()`) instead of the raw bytes. Key order, whitespace and number formatting
//! differ, so genuine deliveries fail (or the check is relaxed until forgeries pass).

use super::{FileFacts, Hit};
use crate::analysis::FnFacts;
use crate::finding::Confidence;
use crate::ir::{Call, Expr, OpKind};
use crate::rule::RuleId;
use crate::words::{has_any, norm};

/// The arguments of a signature check that carry the payload, if the call is one.
fn payload<'c>(facts: &FnFacts<'_>, call: &'c Call, helper: Option<&str>) -> Vec<&'c Expr> {
    one_payload(facts, call, helper).map_or_else(
        || {
            if is_named_sink(call) {
                // `verifySignature(secret, body, sig)`: the payload's position varies.
                call.args.iter().collect()
            } else {
                Vec::new()
            }
        },
        |p| vec![p],
    )
}

fn is_named_sink(call: &Call) -> bool {
    SINKS.contains(&call.method().as_str()) || names_verifier(&call.method())
}

/// A name that says it checks a webhook's signature: `validateWebhookSignature`,
/// `verifyWebhookEvent`, `check_hmac_signature`.
fn names_verifier(name: &str) -> bool {
    let n = norm(name);
    // Providers' SDKs name theirs for the callback or notification they check
    // (`plisio_client.validate_callback`, `verify_notification`).
    has_any(&n, &["verif", "valid", "check"])
        && has_any(
            &n,
            &[
                "signature",
                "webhook",
                "hmac",
                "callback",
                "notification",
                "ipn",
            ],
        )
}

/// A helper that computes a provider's own signature (`getSign`, `makeSignature`,
/// `sign_payload`): a plain hash inside it is the signature.
fn names_signer(name: &str) -> bool {
    let n = norm(name);
    n.starts_with("sign") || has_any(&n, &["getsign", "makesign", "computesign", "gensign"])
}

const SINKS: &[&str] = &[
    "constructevent",
    "constructeventasync",
    "construct_event",
    "verifysignature",
    "verify_signature",
    "verifywebhook",
    "verify_webhook",
    "verifywebhooksignature",
    "validatesignature",
    "validate_signature",
    "verifyheader",
    "verify_header",
    "checksignature",
    "check_signature",
    "isvalidsignature",
    "is_valid_signature",
    "validatewebhook",
    "verifyrequest",
    "verify_request",
    "verifyhmac",
    "verify_hmac",
    "computesignature",
    "compute_signature",
    "sign_payload",
    "signpayload",
    "constructeventwithoptions",
    "hmac_compare",
    "verify_webhook_signature",
];

/// The one payload argument of an HMAC computation or a provider's verifier.
fn one_payload<'c>(facts: &FnFacts<'_>, call: &'c Call, helper: Option<&str>) -> Option<&'c Expr> {
    let m = call.method();
    let chain: Vec<String> = call.callee.iter().map(|s| norm(s)).collect();
    if matches!(
        m.as_str(),
        "constructevent" | "constructeventasync" | "construct_event"
    ) {
        return call.args.first();
    }
    if let Some(p) = crate::lang::jvm_vocab::hmac_payload(call, &facts.values) {
        return Some(p);
    }
    // Python's `hmac.digest(key, msg, digest)` (or `digest` imported from hmac).
    if m == "digest"
        && call.args.len() == 3
        && call.args[2].words().iter().any(|w| w.contains("sha"))
    {
        return call.args.get(1);
    }
    // Ruby `OpenSSL::HMAC.hexdigest("sha256", secret, data)`: the digest comes first.
    if matches!(m.as_str(), "digest" | "hexdigest" | "base64digest")
        && call.args.len() == 3
        && call.args[0]
            .words()
            .iter()
            .any(|w| w.contains("sha") || w.contains("digest"))
    {
        return call.args.get(2);
    }
    let recv = call.receiver_words().join(".");
    if m == "verify"
        && (has_any(&recv, &["webhook", "wh", "svix", "signature", "signer"])
            || chain.first().is_some_and(|r| r == "webhook"))
    {
        return call.args.first();
    }
    if m == "update" && chain.iter().any(|c| c == "createhmac") {
        return call.args.first();
    }
    // A plain hash of payload and secret (`md5(base64(body) + key)`) inside a function that
    // verifies a webhook's signature.
    if m == "update"
        && chain.iter().any(|c| c == "createhash")
        && (names_verifier(&facts.func.name) || helper.is_some_and(names_signer))
    {
        return call.args.first();
    }
    // Python's `hashlib.sha256(dumps(data).encode())`, Go's `sha256.Sum256(b)` and
    // `md5.Sum(b)`, in a function that verifies a signature.
    let plain_hash = matches!(chain.first().map(String::as_str), Some("hashlib"))
        && matches!(m.as_str(), "sha256" | "sha1" | "sha512" | "md5" | "sha384")
        || matches!(
            chain.first().map(String::as_str),
            Some("sha256" | "sha1" | "sha512" | "md5")
        ) && matches!(m.as_str(), "sum256" | "sum" | "sum512");
    if plain_hash
        && (names_verifier(&facts.func.name)
            || helper.is_some_and(|h| names_verifier(h) || names_signer(h)))
    {
        return call.args.first();
    }
    if m == "new"
        && chain.first().is_some_and(|r| r == "hmac")
        && call.args.len() >= 2
        && facts_is_python(call)
    {
        return call.args.get(1).or(call.option("msg"));
    }
    // Rust's ring: `hmac::sign(&key, msg)`, `hmac::verify(&key, msg, tag)`.
    if matches!(m.as_str(), "sign" | "verify")
        && chain.len() >= 2
        && chain[chain.len() - 2] == "hmac"
        && call.args.len() >= 2
    {
        return call.args.get(1);
    }
    if matches!(m.as_str(), "write" | "update") && chain.len() == 2 {
        let var = &call.callee[0];
        if let Some(Expr::Call(c)) = facts.values.get(var)
            && (norm(&c.name()) == "hmacnew"
                || c.callee.iter().any(|s| norm(s) == "createhmac")
                // Rust's hmac crate: `Hmac::<Sha256>::new_from_slice(key)`, `HmacSha256::new…`.
                || norm(&c.name()).starts_with("hmac") && c.method().starts_with("new_from"))
        {
            return call.args.first();
        }
    }
    None
}

/// Python's `hmac.new(key, msg, digestmod)` takes the message; Go's `hmac.New(h, key)` does not.
fn facts_is_python(call: &Call) -> bool {
    call.callee.get(1).is_some_and(|s| s == "new")
}

/// A method that turns text into bytes or text (`getBytes`, Kotlin's `toByteArray`), keeping
/// what the text was.
fn is_text_conversion(method: &str) -> bool {
    matches!(
        method,
        "getbytes" | "tobytearray" | "encodetobytearray" | "encode" | "tostring"
    )
}

/// How a payload expression was parsed or re-serialised, if it was.
fn parsed(facts: &FnFacts<'_>, file: &FileFacts, e: &Expr, depth: u8) -> Option<(String, bool)> {
    let mut found = None;
    e.walk(&mut |x| {
        if found.is_some() {
            return;
        }
        match x {
            Expr::Call(outer) => {
                // The call and the calls it is made on (`dumps(x).encode()`).
                let mut chain = Some(outer.as_ref());
                while let Some(c) = chain {
                    chain = c.receiver.as_deref();
                    if found.is_some() {
                        break;
                    }
                    let n = norm(&c.name());
                    let m = c.method();
                    let reserialised = matches!(
                        n.as_str(),
                        "jsonstringify"
                            | "jsondumps"
                            | "dumps"
                            | "jsonmarshal"
                            | "jsonmarshalindent"
                            | "orjsondumps"
                            | "ujsondumps"
                            | "jsongenerate"
                            | "jsondump"
                            // Rust's serde_json.
                            | "serdejsontostring"
                            | "serdejsontovec"
                            | "serdejsontostringpretty"
                            | "serdejsontovecpretty"
                    ) || matches!(
                        m.as_str(),
                        "model_dump_json" | "json_dumps" | "to_json"
                    ) || crate::lang::jvm_vocab::reserialises(&m)
                        // Java's `body.toString()`, Rust's `body.to_string()`.
                        || norm(&m) == "tostring"
                            && c.callee.len() == 2
                            && parsed_param(facts, &c.callee[0]);
                    let parsed_call = matches!(n.as_str(), "jsonparse" | "jsonloads")
                        || (matches!(m.as_str(), "json" | "get_json")
                            && c.callee.len() >= 2
                            && has_any(&c.callee[0], &["req", "request", "r"]));
                    if reserialised || parsed_call {
                        found = Some((format!("{}()", c.name()), true));
                    } else if c.receiver.is_none()
                        && c.callee.len() == 2
                        && depth < 4
                        && (is_text_conversion(&m)
                            || c.args.is_empty()
                                && matches!(
                                    m.as_str(),
                                    "as_bytes"
                                        | "as_str"
                                        | "as_ref"
                                        | "into_bytes"
                                        | "to_vec"
                                        | "clone"
                                ))
                        // A view of a local's text or bytes (`text.as_bytes()`, `data.getBytes(UTF_8)`
                        // in a signing helper) is that local's value (a parameter bound from the
                        // caller's `payload.toString()`).
                        && let Some(v) = facts.values.get(&c.callee[0])
                        && let Some(hit) = parsed(facts, file, v, depth + 1)
                    {
                        found = Some(hit);
                    }
                }
            }
            Expr::Path(p) => {
                let joined = p.join(".");
                let n = norm(&joined);
                // Rails' `params` (or `request.params`): the body parsed into a hash.
                if n == "requestjson"
                    || n == "requestget_json"
                    || n == "params" && p.len() == 1
                    || n == "requestparams"
                    || n == "requestrequestparameters"
                {
                    found = Some((joined, true));
                } else if p.len() == 1
                    && crate::lang::jvm_vocab::parsed_body_param(facts.func, &p[0])
                {
                    found = Some((format!("{joined} (bound by @RequestBody)"), true));
                } else if file.parsed_body && (n == "reqbody" || n == "requestbody") && p.len() == 2
                {
                    found = Some((format!("{joined} (parsed by express.json())"), false));
                } else if p.len() == 1
                    // A signing helper's text passes through locals: `data = base64 + key`,
                    // `base64 = Buffer.from(body)`, `body = jsonData`.
                    && depth < 4
                    && let Some(v) = facts.values.get(&p[0])
                    && let Some((what, strong)) = parsed(facts, file, v, depth + 1)
                {
                    found = Some((what, strong));
                }
            }
            _ => {}
        }
    });
    found
}

/// Whether `name` is a parameter bound from the parsed body (`@RequestBody Map body`, axum's
/// `Json(v): Json<Value>`), or a helper's parameter given one (`body'1 = v`).
fn parsed_param(facts: &FnFacts<'_>, name: &str) -> bool {
    let param = match facts.values.get(name) {
        Some(Expr::Path(p)) if p.len() == 1 => p[0].as_str(),
        _ => name,
    };
    let func = facts.func;
    crate::lang::jvm_vocab::parsed_body_param(func, param)
        || (func.params.iter().position(|p| p == param))
            .and_then(|i| func.param_types.get(i))
            .is_some_and(|t| crate::lang::rust_parses_body(t))
}

/// A call that computes a signature to compare (`generateSignature(text, secret)`,
/// `calculateHmac(…)`): also used to sign outgoing messages, so it counts only over a
/// re-serialised request.
fn names_signature_maker(call: &Call) -> bool {
    let n = norm(&call.method());
    has_any(&n, &["generate", "calculate", "create", "compute", "calc"])
        && has_any(&n, &["signature", "hmac"])
}

/// `objectMapper.writeValueAsString(request)` where `request` is the request body parsed
/// (`objectMapper.readValue(body, …)`) or bound by `@RequestBody` to a type.
fn reserialised_request(facts: &FnFacts<'_>, e: &Expr) -> Option<String> {
    let mut found = None;
    e.walk(&mut |x| {
        if let Expr::Call(c) = x
            && found.is_none()
            && crate::lang::jvm_vocab::reserialises(&c.method())
            && let Some(Expr::Path(p)) = c.args.first()
            && p.len() == 1
        {
            let parsed_from_body = crate::lang::jvm_vocab::parsed_body_param(facts.func, &p[0])
                || matches!(facts.values.get(&p[0]), Some(Expr::Call(v)) if matches!(
                    v.method().as_str(),
                    "readvalue" | "readtree" | "fromjson" | "decodefromstring" | "convertvalue"
                ));
            if parsed_from_body {
                found = Some(format!("{}({}) of the parsed request", c.name(), p[0]));
            }
        }
    });
    found
}

pub(super) fn check(facts: &FnFacts<'_>, file: &FileFacts, out: &mut Vec<Hit>) {
    for op in &facts.func.ops {
        let OpKind::Call(call) = &op.kind else {
            continue;
        };
        let helper = op.origin.as_ref().map(|o| o.helper.as_str());
        let Some((what, strong)) = payload(facts, call, helper)
            .into_iter()
            .find_map(|arg| parsed(facts, file, arg, 0))
            .or_else(|| {
                names_signature_maker(call)
                    .then(|| {
                        call.args
                            .iter()
                            .find_map(|a| reserialised_request(facts, a))
                    })
                    .flatten()
                    .map(|what| (what, true))
            })
        else {
            continue;
        };
        out.push(Hit {
            rule: RuleId::SecSigParsedBody,
            pos: op.pos,
            origin: op.origin.clone(),
            message: format!(
                "{}() verifies the signature over {what}, not the raw request bytes",
                call.name()
            ),
            confidence: if strong {
                Confidence::High
            } else {
                Confidence::Medium
            },
        });
    }
}
