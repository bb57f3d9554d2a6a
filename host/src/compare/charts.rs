//! The comparison's charts, drawn as SVG by `plotters`: per replay, the
//! prompt of each model call against the window, with its compactions
//! (tokens before and after), overflows and fallbacks marked; and, for all
//! replays together, the tokens each kept against the conversation's size,
//! turn by turn.
//!
//! Each answered model call is one `<circle>` in its chart and nothing else
//! there is one (compactions are triangles, overflows crosses, fallbacks
//! shaded bands), so a page can be checked by counting them.

use plotters::prelude::*;

use super::{ComparedRun, Comparison};
use crate::engines::guard::GuardAction;

/// Chart sizes, pixels.
const PROMPTS_SIZE: (u32, u32) = (960, 280);
const KEPT_SIZE: (u32, u32) = (960, 340);

/// Replays' colours, in order (then again): none is the green of
/// compactions, the red of the window and overflows or the orange of
/// fallbacks.
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
];
/// Compactions.
const GREEN: RGBColor = RGBColor(0, 140, 60);
/// Guard fallbacks.
const ORANGE: RGBColor = RGBColor(255, 165, 0);

/// The colour of replay `index`, in every chart and legend.
pub fn color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// The colour as CSS, for the page around the charts.
pub fn css_color(index: usize) -> String {
    let RGBColor(r, g, b) = color(index);
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// An answered model call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallPoint {
    /// Its number in the replay, from 1.
    pub call: u32,
    /// Its turn, from 1.
    pub turn: usize,
    /// The prompt's tokens.
    pub tokens: u64,
}

/// A compaction that compacted, between two model calls.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionMark {
    /// Where it falls: after this many answered calls of the replay, plus a
    /// half.
    pub x: f64,
    /// Its turn, from 1.
    pub turn: usize,
    /// What set it off.
    pub trigger: String,
    /// The context before and after, tokens.
    pub before: u64,
    /// See `before`.
    pub after: u64,
}

/// A prompt the model found too large.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverflowMark {
    /// Where it falls (an answered call's number, or half-way to the next
    /// for a refused prompt).
    pub x: f64,
    /// The prompt's tokens.
    pub tokens: u64,
}

/// A turn in which the guard took calls away from the engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FallbackSpan {
    /// The turn, from 1.
    pub turn: usize,
    /// Its calls' extent on the chart's x axis.
    pub from: f64,
    /// See `from`.
    pub to: f64,
    /// Guard decisions in it.
    pub events: usize,
}

/// What one replay's prompt chart draws.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallSeries {
    /// Every answered model call, in order.
    pub calls: Vec<CallPoint>,
    /// Every compaction that compacted.
    pub compactions: Vec<CompactionMark>,
    /// Every prompt the model found too large.
    pub overflows: Vec<OverflowMark>,
    /// Every turn with a fallback.
    pub fallbacks: Vec<FallbackSpan>,
}

impl CallSeries {
    /// The series of `run`.
    pub fn of(run: &ComparedRun) -> Self {
        let mut series = Self::default();
        let mut answered = 0u32;
        for turn in run.all_turns() {
            let number = turn.index + 1;
            let first = answered;
            for pass in turn.compaction_passes.iter().filter(|pass| pass.compacted) {
                series.compactions.push(CompactionMark {
                    x: f64::from(first + pass.after_model_calls) + 0.5,
                    turn: number,
                    trigger: pass.trigger.clone(),
                    before: pass.tokens_before,
                    after: pass.tokens_after,
                });
            }
            for prompt in &turn.prompts {
                let x = if prompt.answered {
                    answered += 1;
                    series.calls.push(CallPoint {
                        call: answered,
                        turn: number,
                        tokens: prompt.tokens,
                    });
                    f64::from(answered)
                } else {
                    f64::from(answered) + 0.5
                };
                if prompt.overflow {
                    series.overflows.push(OverflowMark {
                        x,
                        tokens: prompt.tokens,
                    });
                }
            }
            let events = turn
                .guard_events
                .iter()
                .filter(|event| {
                    matches!(
                        event.action,
                        GuardAction::FellBack | GuardAction::Reported | GuardAction::Overloaded
                    )
                })
                .count();
            if events > 0 {
                series.fallbacks.push(FallbackSpan {
                    turn: number,
                    from: f64::from(first) + 0.5,
                    to: f64::from(answered.max(first + 1)) + 0.5,
                    events,
                });
            }
        }
        series
    }
}

/// A chart could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw a chart: {0}")]
pub struct ChartError(String);

fn failed(error: impl std::fmt::Display) -> ChartError {
    ChartError(error.to_string())
}

/// Replay `index`'s prompts against its window, as an SVG document.
pub fn prompts_chart(
    run: &ComparedRun,
    series: &CallSeries,
    index: usize,
) -> Result<String, ChartError> {
    let highest = series
        .calls
        .iter()
        .map(|point| point.tokens)
        .chain(series.compactions.iter().map(|mark| mark.before))
        .chain(series.overflows.iter().map(|mark| mark.tokens))
        .chain([run.window])
        .max()
        .unwrap_or(run.window);
    let x_end = f64::from(series.calls.last().map_or(0, |point| point.call)) + 1.0;
    let y_end = highest as f64 * 1.08;
    let line = color(index);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, PROMPTS_SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..x_end, 0f64..y_end)
            .map_err(failed)?;
        chart
            .configure_mesh()
            .x_desc("model call")
            .y_desc("prompt tokens")
            .light_line_style(WHITE.mix(0.0))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(failed)?;
        let band = ORANGE.mix(0.2).filled();
        chart
            .draw_series(
                series
                    .fallbacks
                    .iter()
                    .map(|span| Rectangle::new([(span.from, 0.0), (span.to, y_end)], band)),
            )
            .map_err(failed)?;
        let window = run.window as f64;
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, window), (x_end, window)],
                8,
                5,
                RED.stroke_width(2),
            ))
            .map_err(failed)?;
        chart
            .draw_series(LineSeries::new(
                series
                    .calls
                    .iter()
                    .map(|point| (f64::from(point.call), point.tokens as f64)),
                line.stroke_width(1),
            ))
            .map_err(failed)?;
        chart
            .draw_series(series.calls.iter().map(|point| {
                Circle::new(
                    (f64::from(point.call), point.tokens as f64),
                    3,
                    line.filled(),
                )
            }))
            .map_err(failed)?;
        for mark in &series.compactions {
            chart
                .draw_series(LineSeries::new(
                    [(mark.x, mark.before as f64), (mark.x, mark.after as f64)],
                    GREEN.stroke_width(2),
                ))
                .map_err(failed)?;
        }
        chart
            .draw_series(
                series.compactions.iter().map(|mark| {
                    TriangleMarker::new((mark.x, mark.after as f64), 6, GREEN.filled())
                }),
            )
            .map_err(failed)?;
        chart
            .draw_series(
                series
                    .overflows
                    .iter()
                    .map(|mark| Cross::new((mark.x, mark.tokens as f64), 6, RED.stroke_width(2))),
            )
            .map_err(failed)?;
        root.present().map_err(failed)?;
    }
    Ok(svg)
}

/// Every replay's kept tokens (its last prompt of each turn) against the
/// conversation's size, as an SVG document.
pub fn kept_chart(comparison: &Comparison) -> Result<String, ChartError> {
    let turns: Vec<Vec<(usize, u64, u64)>> = comparison
        .runs
        .iter()
        .map(|run| {
            let mut kept = 0;
            run.all_turns()
                .into_iter()
                .map(|turn| {
                    if turn.model_calls > 0 {
                        kept = turn.last_prompt_tokens;
                    }
                    (turn.index + 1, kept, turn.conversation_tokens)
                })
                .collect()
        })
        .collect();
    let highest = turns
        .iter()
        .flatten()
        .map(|(_, kept, conversation)| (*kept).max(*conversation))
        .max()
        .unwrap_or(1)
        .max(1);
    let x_end = turns.iter().map(Vec::len).max().unwrap_or(0) as f64 + 1.0;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, KEPT_SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..x_end, 0f64..highest as f64 * 1.05)
            .map_err(failed)?;
        chart
            .configure_mesh()
            .x_desc("turn")
            .y_desc("tokens")
            .light_line_style(WHITE.mix(0.0))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(failed)?;
        if let Some(longest) = turns.iter().max_by_key(|run| run.len()) {
            chart
                .draw_series(DashedLineSeries::new(
                    longest
                        .iter()
                        .map(|(turn, _, conversation)| (*turn as f64, *conversation as f64)),
                    6,
                    4,
                    BLACK.mix(0.6).stroke_width(2),
                ))
                .map_err(failed)?;
        }
        for (index, run) in turns.iter().enumerate() {
            chart
                .draw_series(LineSeries::new(
                    run.iter()
                        .map(|(turn, kept, _)| (*turn as f64, *kept as f64)),
                    color(index).stroke_width(2),
                ))
                .map_err(failed)?;
        }
        root.present().map_err(failed)?;
    }
    Ok(svg)
}
