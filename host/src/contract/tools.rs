//! Tools an engine offers the model (`wit/tools.wit`): their definitions and
//! the rules the host holds them to. A definition that breaks a rule is the
//! engine's failure (`invalid-output`), like any answer against the
//! contract; so is a tool result over its size cap.

use serde::{Deserialize, Serialize};

use crate::contract::tokens::pressure_json;

/// Most tools one engine may offer.
pub const MAX_TOOLS: usize = 16;
/// Longest tool name, characters.
pub const MAX_TOOL_NAME_CHARS: usize = 64;
/// Longest description, bytes.
pub const MAX_TOOL_DESCRIPTION_BYTES: usize = 2 * 1024;
/// Largest parameters schema, bytes of JSON.
pub const MAX_TOOL_PARAMETERS_BYTES: usize = 16 * 1024;
/// Largest tool result, bytes.
pub const MAX_TOOL_RESULT_BYTES: usize = 256 * 1024;
/// Most bytes the whole tool set may take as the model is told of it
/// ([`model_view`] of each tool, as JSON): every model request carries it.
pub const MAX_TOOL_SET_BYTES: usize = 32 * 1024;
/// Most tokens the whole tool set may take as the model is told of it, by
/// the pre-prompt check's estimate of JSON ([`pressure_json`]).
pub const MAX_TOOL_SET_TOKENS: u64 = 8_000;

/// A tool, as the model is told of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineTool {
    /// What calls name it: 1–64 of `a-z A-Z 0-9 _ -`.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// Its arguments as a JSON Schema object (JSON text).
    pub parameters_json: String,
}

/// Why a set of tool definitions breaks the contract.
pub fn check_definitions(tools: &[EngineTool]) -> Result<(), String> {
    if tools.len() > MAX_TOOLS {
        return Err(format!(
            "{} tools, more than the {MAX_TOOLS} an engine may offer",
            tools.len()
        ));
    }
    let mut names = std::collections::HashSet::new();
    for tool in tools {
        check_name(&tool.name)?;
        if !names.insert(tool.name.as_str()) {
            return Err(format!("tool `{}` is declared twice", tool.name));
        }
        if tool.description.len() > MAX_TOOL_DESCRIPTION_BYTES {
            return Err(format!(
                "tool `{}`'s description is {} bytes, over {MAX_TOOL_DESCRIPTION_BYTES}",
                tool.name,
                tool.description.len()
            ));
        }
        if tool.parameters_json.len() > MAX_TOOL_PARAMETERS_BYTES {
            return Err(format!(
                "tool `{}`'s parameters are {} bytes, over {MAX_TOOL_PARAMETERS_BYTES}",
                tool.name,
                tool.parameters_json.len()
            ));
        }
        match serde_json::from_str::<serde_json::Value>(&tool.parameters_json) {
            Ok(serde_json::Value::Object(_)) => {}
            Ok(_) => {
                return Err(format!(
                    "tool `{}`'s parameters are not a JSON Schema object",
                    tool.name
                ));
            }
            Err(error) => {
                return Err(format!(
                    "tool `{}`'s parameters are not JSON: {error}",
                    tool.name
                ));
            }
        }
    }
    check_set_size(tools)
}

/// A tool as the model is told of it: `name`, `description` and
/// `parameters` (the schema as JSON, not as text), what the sidecar's
/// `tools` answers and the runner's model requests carry.
pub fn model_view(tool: &EngineTool) -> serde_json::Value {
    serde_json::json!({
        "name": tool.name,
        "description": tool.description,
        "parameters": serde_json::from_str::<serde_json::Value>(&tool.parameters_json)
            .unwrap_or_else(|_| serde_json::json!({"type": "object"})),
    })
}

/// Why the whole set is too large for every model request to carry: its
/// tools together, as the model sees them, over [`MAX_TOOL_SET_BYTES`] or
/// [`MAX_TOOL_SET_TOKENS`].
fn check_set_size(tools: &[EngineTool]) -> Result<(), String> {
    let (mut bytes, mut tokens) = (0usize, 0u64);
    for tool in tools {
        let json = model_view(tool).to_string();
        bytes += json.len();
        tokens += pressure_json(&json);
    }
    if bytes > MAX_TOOL_SET_BYTES || tokens > MAX_TOOL_SET_TOKENS {
        return Err(format!(
            "the {} tools take {bytes} bytes (~{tokens} tokens) as the model sees them, over the \
             whole tool set's cap of {MAX_TOOL_SET_BYTES} bytes and {MAX_TOOL_SET_TOKENS} tokens",
            tools.len()
        ));
    }
    Ok(())
}

/// Why `name` is not a tool name; shown escaped, since an engine wrote it.
pub fn check_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.chars().count() <= MAX_TOOL_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{}` is not a tool name (1 to {MAX_TOOL_NAME_CHARS} of a-z, A-Z, 0-9, `_`, `-`)",
            crate::contract::text::untrusted_line(name, 80)
        ))
    }
}

/// Why a tool result breaks the contract (its size).
pub fn check_result(result: &str) -> Result<(), String> {
    if result.len() > MAX_TOOL_RESULT_BYTES {
        Err(format!(
            "the tool result is {} bytes, over the {MAX_TOOL_RESULT_BYTES} byte limit",
            result.len()
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, parameters: &str) -> EngineTool {
        EngineTool {
            name: name.into(),
            description: "finds things".into(),
            parameters_json: parameters.into(),
        }
    }

    #[test]
    fn accepts_well_formed_tools() {
        check_definitions(&[tool("grep", r#"{"type":"object"}"#), tool("expand-1", "{}")])
            .expect("valid");
    }

    #[test]
    fn refuses_bad_names_duplicates_and_schemas() {
        for bad in ["", "has space", "é", &"x".repeat(65), "a\u{1b}[2J"] {
            let error = check_definitions(&[tool(bad, "{}")]).expect_err(bad);
            assert!(error.contains("is not a tool name"), "{error}");
            assert!(!error.contains('\u{1b}'), "escaped: {error}");
        }
        let twice = check_definitions(&[tool("a", "{}"), tool("a", "{}")]).expect_err("twice");
        assert!(twice.contains("twice"), "{twice}");
        assert!(check_definitions(&[tool("a", "[1]")]).is_err());
        assert!(check_definitions(&[tool("a", "{")]).is_err());
        let many: Vec<EngineTool> = (0..17).map(|i| tool(&format!("t{i}"), "{}")).collect();
        assert!(check_definitions(&many).is_err());
    }

    #[test]
    fn caps_the_whole_set_as_the_model_sees_it() {
        let description = "d".repeat(MAX_TOOL_DESCRIPTION_BYTES);
        let schema = format!(
            r#"{{"type":"object","description":"{}"}}"#,
            "s".repeat(MAX_TOOL_PARAMETERS_BYTES - 40)
        );
        let at_the_caps = |count: usize| -> Vec<EngineTool> {
            (0..count)
                .map(|i| EngineTool {
                    name: format!("tool{i}"),
                    description: description.clone(),
                    parameters_json: schema.clone(),
                })
                .collect()
        };
        check_definitions(&at_the_caps(1)).expect("one tool at the item caps fits");
        let error = check_definitions(&at_the_caps(MAX_TOOLS)).expect_err("16 at the caps");
        assert!(
            error.contains("whole tool set's cap of 32768 bytes"),
            "{error}"
        );
        // Whitespace the model is not sent does not count.
        let padded = EngineTool {
            name: "padded".into(),
            description: "d".into(),
            parameters_json: format!("{{{}}}", " ".repeat(MAX_TOOL_PARAMETERS_BYTES - 2)),
        };
        let three: Vec<EngineTool> = (0..3)
            .map(|i| EngineTool {
                name: format!("padded{i}"),
                ..padded.clone()
            })
            .collect();
        check_definitions(&three).expect("48 KiB of whitespace is 3 empty schemas");
    }

    #[test]
    fn caps_the_result() {
        assert!(check_result(&"x".repeat(MAX_TOOL_RESULT_BYTES)).is_ok());
        assert!(check_result(&"x".repeat(MAX_TOOL_RESULT_BYTES + 1)).is_err());
    }
}
