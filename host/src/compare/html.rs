//! The comparison as one self-contained HTML page: the charts inline as SVG,
//! the styles and a small script inline, nothing fetched, so it opens from
//! `file://` anywhere.
//!
//! Every text that is not the host's own (engine ids, the guard's reasons,
//! a failed turn's error) is made one safe line and capped
//! ([`untrusted_line`]), then HTML-escaped. Each replay's chart is a
//! `<figure class="run">` whose `data-*` attributes say what it draws
//! (`data-calls`: its `<circle>`s); the script only adds tooltips, and
//! marks the page `data-ready` when it has run.

use std::fmt::Write as _;

use serde_json::json;

use super::Comparison;
use super::charts::{self, CallSeries, ChartError};
use crate::contract::text::untrusted_line;
use crate::engines::guard::GuardAction;

/// The most bytes of one engine-supplied text shown.
const MAX_TEXT_BYTES: usize = 400;
/// The most guard decisions and failed turns listed per replay.
const MAX_REASON_ROWS: usize = 50;

const STYLE: &str = "
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1000px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; }
p.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; width: 100%; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: right; vertical-align: top; }
th:first-child, td:first-child, td.text, table.reasons th { text-align: left; }
td.reason { text-align: left; font-family: ui-monospace, monospace; font-size: 12px; word-break: break-all; }
figure { margin: 12px 0; }
figcaption { font-weight: 600; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
.legend span { margin-right: 16px; }
svg { max-width: 100%; height: auto; }
";

/// The script: a tooltip (`<title>`) on each call and compaction from the
/// embedded data, and `data-ready` on the page once it has run.
const SCRIPT: &str = r#"
(function () {
  var data = JSON.parse(document.getElementById("ctxbox-data").textContent);
  document.querySelectorAll("figure.run").forEach(function (figure) {
    var run = data.runs[Number(figure.dataset.run)];
    var svgNs = "http://www.w3.org/2000/svg";
    function tip(element, text) {
      var title = document.createElementNS(svgNs, "title");
      title.textContent = text;
      element.appendChild(title);
    }
    figure.querySelectorAll("circle").forEach(function (circle, i) {
      var call = run.calls[i];
      if (call) tip(circle, "call " + call[0] + " (turn " + call[1] + "): " + call[2] + " tokens");
    });
    figure.querySelectorAll("polygon").forEach(function (triangle, i) {
      var pass = run.compactions[i];
      if (pass) tip(triangle, "turn " + pass[0] + ", " + pass[1] + " compaction: " + pass[2] + " \u2192 " + pass[3] + " tokens");
    });
  });
  document.documentElement.dataset.ready = "true";
})();
"#;

/// The page for `comparison`.
pub fn page(comparison: &Comparison) -> Result<String, ChartError> {
    let series: Vec<CallSeries> = comparison.runs.iter().map(CallSeries::of).collect();
    let mut html = String::with_capacity(256 * 1024);
    let title = format!("ctxbox compare: {}", shown(&comparison.transcript));
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n\
         <p class=\"meta\">{} turns replayed through {} engine–window pairs, {} at a time. \
         Prompt sizes are the host's estimates; the dashed red line is the model's window.</p>\n",
        comparison.turns,
        comparison.runs.len(),
        comparison.parallel
    );
    summary_table(&mut html, comparison);

    html.push_str("<h2>Tokens kept vs the conversation</h2>\n<figure id=\"kept\">\n");
    html.push_str(&charts::kept_chart(comparison)?);
    html.push_str("\n<div class=\"legend\"><span><span class=\"swatch\" style=\"background:#666\"></span>conversation so far (dashed)</span>");
    for (index, run) in comparison.runs.iter().enumerate() {
        let _ = write!(
            html,
            "<span><span class=\"swatch\" style=\"background:{}\"></span>{} @ {}</span>",
            charts::css_color(index),
            shown(&run.engine),
            run.window
        );
    }
    html.push_str("</div>\n</figure>\n");

    html.push_str(
        "<h2>Prompt tokens per model call</h2>\n<p class=\"meta\">Dots: the prompt of each \
         answered model call. Green: a compaction, from the context before it down to the \
         triangle after it. Red crosses: prompts the model found too large. Orange bands: \
         turns in which the guard served calls with <code>legacy</code>.</p>\n",
    );
    for (index, (run, series)) in comparison.runs.iter().zip(&series).enumerate() {
        let _ = write!(
            html,
            "<figure class=\"run\" data-run=\"{index}\" data-engine=\"{}\" data-window=\"{}\" \
             data-calls=\"{}\" data-compactions=\"{}\" data-overflows=\"{}\" data-fallback-turns=\"{}\">\n\
             <figcaption><span class=\"swatch\" style=\"background:{}\"></span>{} under a {}-token window</figcaption>\n",
            shown(&run.engine),
            run.window,
            series.calls.len(),
            series.compactions.len(),
            series.overflows.len(),
            series.fallbacks.len(),
            charts::css_color(index),
            shown(&run.engine),
            run.window
        );
        html.push_str(&charts::prompts_chart(run, series, index)?);
        html.push_str("\n</figure>\n");
    }

    reasons(&mut html, comparison);
    let _ = write!(
        html,
        "<script type=\"application/json\" id=\"ctxbox-data\">{}</script>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
        embedded_data(&series)
    );
    Ok(html)
}

fn summary_table(html: &mut String, comparison: &Comparison) {
    html.push_str(
        "<h2>Summary</h2>\n<table id=\"summary\">\n<tr><th>engine</th><th>window</th>\
         <th>model calls</th><th>compactions</th><th>largest prompt</th><th>share kept</th>\
         <th>fallbacks</th><th>failed turns</th><th>wall time</th>\
         <th>model completions</th><th>engine tool calls</th></tr>\n",
    );
    for (index, run) in comparison.runs.iter().enumerate() {
        let report = &run.report;
        let _ = writeln!(
            html,
            "<tr><td><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{} ({:.0}%)</td><td>{:.0}%</td><td>{}{}</td><td>{}</td>\
             <td>{:.2} s</td><td>{}</td><td>{}</td></tr>",
            charts::css_color(index),
            shown(&run.engine),
            run.window,
            report.model_calls,
            report.compactions,
            report.largest_prompt_tokens,
            report.largest_prompt_tokens as f64 * 100.0 / run.window.max(1) as f64,
            run.share_kept * 100.0,
            report.fallbacks,
            if report.quarantined.is_empty() {
                String::new()
            } else {
                format!(" (quarantined: {})", shown(&report.quarantined.join(", ")))
            },
            report.failed_turns.len(),
            run.wall_ms as f64 / 1000.0,
            report.completions.completions,
            report.engine_tool_calls
        );
    }
    html.push_str("</table>\n");
}

/// Per replay, why the guard took calls away and why turns failed.
fn reasons(html: &mut String, comparison: &Comparison) {
    html.push_str("<h2>Guard decisions and failed turns</h2>\n");
    for run in &comparison.runs {
        let mut rows: Vec<(usize, String, String)> = Vec::new();
        for turn in run.all_turns() {
            for event in &turn.guard_events {
                if event.action == GuardAction::Recovered {
                    continue;
                }
                rows.push((
                    turn.index + 1,
                    format!(
                        "{} {} ({})",
                        event.operation,
                        event.action.as_str(),
                        event.classification.as_str()
                    ),
                    event.reason.clone(),
                ));
            }
        }
        for failed in &run.report.failed_turns {
            rows.push((
                failed.index + 1,
                format!("turn failed ({})", failed.kind),
                failed.error.clone(),
            ));
        }
        let _ = writeln!(
            html,
            "<h3>{} under a {}-token window</h3>",
            shown(&run.engine),
            run.window
        );
        if rows.is_empty() {
            html.push_str("<p>none: every call served by the engine, every turn completed.</p>\n");
            continue;
        }
        html.push_str(
            "<table class=\"reasons\">\n<tr><th>turn</th><th>what</th><th>why</th></tr>\n",
        );
        for (turn, what, why) in rows.iter().take(MAX_REASON_ROWS) {
            let _ = writeln!(
                html,
                "<tr><td>{turn}</td><td class=\"text\">{}</td><td class=\"reason\">{}</td></tr>",
                shown(what),
                shown(why)
            );
        }
        html.push_str("</table>\n");
        if rows.len() > MAX_REASON_ROWS {
            let _ = writeln!(
                html,
                "<p>and {} more (see <code>--json</code>).</p>",
                rows.len() - MAX_REASON_ROWS
            );
        }
    }
}

/// The points the script annotates, as JSON safe inside a `<script>`
/// element: per replay, `[call, turn, tokens]` and `[turn, trigger,
/// before, after]`.
fn embedded_data(series: &[CallSeries]) -> String {
    let runs: Vec<serde_json::Value> = series
        .iter()
        .map(|series| {
            json!({
                "calls": series.calls.iter()
                    .map(|point| json!([point.call, point.turn, point.tokens]))
                    .collect::<Vec<_>>(),
                "compactions": series.compactions.iter()
                    .map(|mark| json!([mark.turn, mark.trigger, mark.before, mark.after]))
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "runs": runs })
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// Text that is not the host's own, as it may appear in the page: one safe
/// line, capped, HTML-escaped.
fn shown(text: &str) -> String {
    escape(&untrusted_line(text, MAX_TEXT_BYTES))
}

/// `text` with HTML's special characters as entities.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_text_is_one_escaped_capped_line() {
        let hostile = format!(
            "<script>alert('x')</script>\n\u{1b}[31m{}",
            "a".repeat(5_000)
        );
        let text = shown(&hostile);
        assert!(text.starts_with("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;\\n\\u{1b}"));
        assert!(!text.contains('<') && !text.contains('\n'));
        assert!(text.len() < MAX_TEXT_BYTES + 200, "{}", text.len());
    }

    #[test]
    fn embedded_data_cannot_close_its_script_element() {
        let series = CallSeries {
            compactions: vec![charts::CompactionMark {
                x: 1.5,
                turn: 1,
                trigger: "</script><b>".into(),
                before: 10,
                after: 5,
            }],
            ..CallSeries::default()
        };
        let data = embedded_data(&[series]);
        assert!(!data.contains('<'), "{data}");
        let parsed: serde_json::Value = serde_json::from_str(&data).expect("still JSON");
        assert_eq!(parsed["runs"][0]["compactions"][0][1], "</script><b>");
    }
}
