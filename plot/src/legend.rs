//! The legend, drawn in its own strip to the right of the charts so it never
//! covers data: a swatch and a name per entry, top to bottom.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::canvas::{DrawResult, FONT};

/// How an entry's swatch looks.
pub enum Swatch {
    /// A series line of this colour.
    Line(RGBColor),
    /// A shaded area (a phase kind) of this colour.
    Area(RGBAColor),
}

pub struct Entry {
    pub swatch: Swatch,
    pub name: String,
}

/// Width of the legend strip in pixels.
pub const WIDTH: u32 = 170;

/// The charts' area and the legend's strip of a figure.
pub type Framed<DB> = (DrawingArea<DB, Shift>, DrawingArea<DB, Shift>);

/// Every figure's frame: a white page `width` pixels wide, titled, and the
/// legend's strip cut off its right side. Returns the charts' area (under
/// the title) and the strip.
pub fn frame<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    width: u32,
    title: &str,
) -> Result<Framed<DB>, Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (main, side) = root.split_horizontally(width - WIDTH);
    Ok((main.titled(title, (FONT, 20))?, side))
}
const ROW: i32 = 22;

/// Draws `entries` from `top` down in `area` (the strip).
pub fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    top: i32,
    entries: &[Entry],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let font = FontDesc::new(FontFamily::Name(FONT), 13.0, FontStyle::Normal)
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, e) in entries.iter().enumerate() {
        let y = top + i as i32 * ROW;
        let x = 10;
        match e.swatch {
            Swatch::Line(c) => area.draw(&PathElement::new(
                vec![(x, y), (x + 22, y)],
                c.stroke_width(2),
            ))?,
            Swatch::Area(c) => {
                area.draw(&Rectangle::new([(x, y - 6), (x + 22, y + 6)], c.filled()))?
            }
        }
        area.draw(&Text::new(e.name.clone(), (x + 30, y), font.clone()))?;
    }
    Ok(())
}
