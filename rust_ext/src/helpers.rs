//! Functions registered for every script (spec/rhai.md §3.1, §3.2, and the serde-backed JSON pair).
//!
//! None of them touches files, the network, processes or the environment. Functions registered
//! on the engine's own namespace take precedence over the standard package, which is how `trim`,
//! `is_empty` (strings), `to_json(Map)` and `sleep` are shadowed, and how the standard `replace`
//! is replaced by one that checks the size of its result before building it.
//!
//! Every helper that builds a string or an array works out its size first and refuses (with
//! Rhai's own "too large" limit error) anything over the engine's limits, before allocating it;
//! every helper that walks nested data stops at `MAX_NESTING` levels.

use crate::convert::{deeper_than, parse_json_text, to_json_text_within, JsonError, MAX_NESTING};
use rhai::{
    Array, Dynamic, Engine, EvalAltResult, ImmutableString, Map, NativeCallContext, Position,
    FLOAT, INT,
};

type FnResult<T> = Result<T, Box<EvalAltResult>>;

fn runtime_error(message: String) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorRuntime(message.into(), Position::NONE))
}

fn too_large(what: &str) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorDataTooLarge(
        what.to_string(),
        Position::NONE,
    ))
}

/// Refuse a string of `len` bytes if the engine's limit is lower.
fn check_string(ctx: &NativeCallContext, len: usize) -> FnResult<()> {
    let max = ctx.engine().max_string_size();
    if max > 0 && len > max {
        return Err(too_large("Length of string"));
    }
    Ok(())
}

/// Refuse an array of `len` items if the engine's limit is lower.
fn check_array(ctx: &NativeCallContext, len: usize) -> FnResult<()> {
    let max = ctx.engine().max_array_size();
    if max > 0 && len > max {
        return Err(too_large("Size of array/BLOB"));
    }
    Ok(())
}

/// `items` joined by `sep`, refused before it grows past the string limit.
pub fn join(ctx: &NativeCallContext, items: &Array, sep: &str) -> FnResult<String> {
    // The separators alone first: that is what made a 10 GB string out of small inputs.
    let seps = sep.len().saturating_mul(items.len().saturating_sub(1));
    check_string(ctx, seps)?;
    let mut total = seps;
    let mut parts = Vec::with_capacity(items.len());
    for item in items {
        if deeper_than(item, MAX_NESTING) {
            return Err(runtime_error(format!(
                "join: an item is nested deeper than {MAX_NESTING} levels"
            )));
        }
        let part = item.to_string();
        total = total.saturating_add(part.len());
        check_string(ctx, total)?;
        parts.push(part);
    }
    Ok(parts.join(sep))
}

/// `text` split on `sep`, refused before it grows past the array limit.
pub fn split(ctx: &NativeCallContext, text: &str, sep: &str) -> FnResult<Array> {
    check_array(ctx, text.split(sep).count())?;
    Ok(text
        .split(sep)
        .map(|p| Dynamic::from(p.to_string()))
        .collect())
}

/// Rhai's `replace`, with the length of the result checked before it is built (the standard
/// one builds the whole result, then checks it).
fn replace(
    ctx: &NativeCallContext,
    text: &mut ImmutableString,
    find: &str,
    with: &str,
) -> FnResult<()> {
    if text.is_empty() {
        return Ok(());
    }
    // `str::replace` with an empty pattern inserts `with` at every character boundary.
    let count = if find.is_empty() {
        text.chars().count() + 1
    } else {
        text.matches(find).count()
    };
    if count == 0 {
        return Ok(());
    }
    let len = (text.len() - count * find.len()).saturating_add(count.saturating_mul(with.len()));
    check_string(ctx, len)?;
    *text = text.replace(find, with).into();
    Ok(())
}

/// `ceil(utf8_bytes / 4)`: the heuristic token count the upstream uses.
pub fn count_tokens(text: &str) -> INT {
    text.len().div_ceil(4) as INT
}

/// Whether `text` names a Mermaid diagram type anywhere.
pub fn is_mermaid(text: &str) -> bool {
    const MARKERS: [&str; 6] = [
        "graph",
        "sequenceDiagram",
        "classDiagram",
        "stateDiagram",
        "erDiagram",
        "flowchart",
    ];
    MARKERS.iter().any(|m| text.contains(m))
}

/// Upstream parity: markdown markers, or simply non-empty (so in effect `text != ""`).
pub fn is_markdown(text: &str) -> bool {
    text.contains("##") || text.contains("**") || text.contains("```") || !text.is_empty()
}

/// `content_format`: one of the known format names, else "text".
pub fn content_format(format: &str) -> &'static str {
    match format {
        "json" => "json",
        "mermaid" => "mermaid",
        "markdown" => "markdown",
        "code" => "code",
        _ => "text",
    }
}

/// `max / cur` style helpers of §3.2.
pub fn usage_ratio(max: INT, current: INT) -> FLOAT {
    if max == 0 {
        1.0
    } else {
        current as FLOAT / max as FLOAT
    }
}

/// Whether a region at `current` of `max` tokens has reached `threshold`.
pub fn needs_eviction(max: INT, current: INT, threshold: FLOAT) -> bool {
    max == 0 || usage_ratio(max, current) >= threshold
}

fn map_of(pairs: Vec<(&str, Dynamic)>) -> Map {
    pairs.into_iter().map(|(k, v)| (k.into(), v)).collect()
}

/// Register the JSON pair, the text helpers and the region/type helpers on `engine`.
pub fn register_shared(engine: &mut Engine) {
    // JSON, serde-backed: any JSON value, valid JSON out (no Rust Debug escapes).
    engine.register_fn("parse_json", |text: &str| -> FnResult<Dynamic> {
        parse_json_text(text).map_err(|e| runtime_error(format!("parse_json: {e}")))
    });
    fn to_json(ctx: &NativeCallContext, value: &Dynamic) -> FnResult<String> {
        let max = match ctx.engine().max_string_size() {
            0 => usize::MAX,
            max => max,
        };
        to_json_text_within(value, max).map_err(|e| match e {
            JsonError::TooLong => too_large("Length of string"),
            JsonError::Other(message) => runtime_error(format!("to_json: {message}")),
        })
    }
    engine.register_fn(
        "to_json",
        |ctx: NativeCallContext, value: Dynamic| -> FnResult<String> { to_json(&ctx, &value) },
    );
    engine.register_fn(
        "to_json",
        |ctx: NativeCallContext, map: Map| -> FnResult<String> {
            to_json(&ctx, &Dynamic::from_map(map))
        },
    );

    // §3.1 text helpers.
    engine.register_fn("contains", |text: &str, pat: &str| text.contains(pat));
    engine.register_fn("starts_with", |text: &str, pat: &str| text.starts_with(pat));
    engine.register_fn("ends_with", |text: &str, pat: &str| text.ends_with(pat));
    engine.register_fn("trim", |text: &str| text.trim().to_string());
    engine.register_fn(
        "join",
        |ctx: NativeCallContext, items: Array, sep: &str| -> FnResult<String> {
            join(&ctx, &items, sep)
        },
    );
    engine.register_fn(
        "split",
        |ctx: NativeCallContext, text: &str, sep: &str| -> FnResult<Array> {
            split(&ctx, text, sep)
        },
    );
    // The standard `replace` (all four forms), checked before building.
    engine.register_fn(
        "replace",
        |ctx: NativeCallContext, text: &mut ImmutableString, find: &str, with: &str| {
            replace(&ctx, text, find, with)
        },
    );
    engine.register_fn(
        "replace",
        |ctx: NativeCallContext, text: &mut ImmutableString, find: &str, with: char| {
            replace(&ctx, text, find, &with.to_string())
        },
    );
    engine.register_fn(
        "replace",
        |ctx: NativeCallContext, text: &mut ImmutableString, find: char, with: &str| {
            replace(&ctx, text, &find.to_string(), with)
        },
    );
    engine.register_fn(
        "replace",
        |ctx: NativeCallContext, text: &mut ImmutableString, find: char, with: char| {
            replace(&ctx, text, &find.to_string(), &with.to_string())
        },
    );
    engine.register_fn("count_tokens", count_tokens);
    engine.register_fn("is_json", |text: &str| {
        serde_json::from_str::<serde_json::Value>(text).is_ok()
    });
    engine.register_fn("is_mermaid", is_mermaid);
    engine.register_fn("is_markdown", is_markdown);
    engine.register_fn("is_empty", |text: &str| text.trim().is_empty());

    // §3.2 region and budget helpers.
    engine.register_fn("region_pinned", || "pinned".to_string());
    engine.register_fn("region_temporary", || "temporary".to_string());
    engine.register_fn("region_clearable", || "clearable".to_string());
    engine.register_fn("region_sliding_window", |n: INT| {
        map_of(vec![
            ("kind", "sliding_window".into()),
            ("max_items", n.into()),
        ])
    });
    engine.register_fn("region_compacting", |t: INT| {
        map_of(vec![
            ("kind", "compacting".into()),
            ("threshold_tokens", t.into()),
        ])
    });
    engine.register_fn("region_custom", |script: &str, persistent: bool| {
        map_of(vec![
            ("kind", "custom".into()),
            ("script", script.to_string().into()),
            ("persistent", persistent.into()),
        ])
    });
    engine.register_fn("region_entry", |content: &str, tokens: INT| {
        map_of(vec![
            ("content", content.to_string().into()),
            ("tokens", tokens.into()),
        ])
    });
    engine.register_fn("content_format", |f: &str| content_format(f).to_string());
    engine.register_fn("tokens_remaining", |max: INT, cur: INT| {
        max.saturating_sub(cur)
    });
    engine.register_fn("usage_ratio", usage_ratio);
    engine.register_fn("needs_eviction", needs_eviction);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> Engine {
        let mut e = Engine::new();
        register_shared(&mut e);
        e
    }

    #[test]
    fn text_helpers_match_spec_case_31() {
        let e = engine();
        assert_eq!(e.eval::<INT>(r#"count_tokens("hello world")"#).unwrap(), 3);
        assert_eq!(e.eval::<INT>(r#"count_tokens("")"#).unwrap(), 0);
        assert!(e.eval::<bool>(r#"is_json("[1,2,3]")"#).unwrap());
        assert!(e.eval::<bool>(r#"is_mermaid("flowchart LR")"#).unwrap());
        assert!(e.eval::<bool>(r#"is_markdown("just plain text")"#).unwrap());
        assert!(e.eval::<bool>(r#"is_empty("   ")"#).unwrap());
        assert_eq!(
            e.eval::<String>(r#"join(["a","b","c"], ",")"#).unwrap(),
            "a,b,c"
        );
        assert_eq!(e.eval::<Array>(r#"split("abc", ",")"#).unwrap().len(), 1);
        assert!(e.eval::<bool>(r#""  hello  ".trim() == "hello""#).unwrap());
    }

    #[test]
    fn region_helpers_match_spec_case_32() {
        let e = engine();
        assert_eq!(e.eval::<INT>("tokens_remaining(100, 30)").unwrap(), 70);
        let min = e
            .eval::<INT>(&format!(
                "tokens_remaining({}, 1)",
                "-9223372036854775807 - 1"
            ))
            .unwrap();
        assert_eq!(min, INT::MIN);
        assert_eq!(e.eval::<FLOAT>("usage_ratio(0, 50)").unwrap(), 1.0);
        assert!(e.eval::<bool>("needs_eviction(100, 80, 0.8)").unwrap());
        assert_eq!(
            e.eval::<String>(r#"content_format("bogus")"#).unwrap(),
            "text"
        );
        let m = e.eval::<Map>("region_sliding_window(10)").unwrap();
        assert_eq!(m["kind"].to_string(), "sliding_window");
        assert_eq!(m["max_items"].as_int().unwrap(), 10);
    }

    #[test]
    fn json_helpers_are_serde_backed() {
        let e = engine();
        assert_eq!(
            e.eval::<String>(r#"let d = parse_json("{\"a\": 1}"); to_json(d)"#)
                .unwrap(),
            r#"{"a":1}"#
        );
        assert!(e
            .eval::<Dynamic>(r#"parse_json("[1,2]")"#)
            .unwrap()
            .is_array());
        let err = e.eval::<Dynamic>(r#"parse_json("not json")"#).unwrap_err();
        assert!(err.to_string().contains("parse_json:"));
        let out = e
            .eval::<String>(r#"to_json(#{ s: "a\u202Fb\u200Bc" })"#)
            .unwrap();
        assert!(!out.contains("\\u{"));
        let back: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(back["s"], "a\u{202f}b\u{200b}c");
    }
}
