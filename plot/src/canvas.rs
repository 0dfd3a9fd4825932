//! Where a figure goes: an SVG (text stays text, so it scales and can be
//! searched) or a PNG (for chat, tickets and slides), chosen by the output's
//! extension. Text is set in a font compiled into the binary (a subset of
//! DejaVu Sans, `plot/assets/`), so PNGs render the same on a machine
//! without any fonts installed, and label widths are measured with it.

use std::error::Error;
use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use iorepro_format::error::{TraceError, TraceResult};

/// The family name every figure uses for text.
pub const FONT: &str = "sans-serif";

static FONT_DATA: &[u8] = include_bytes!("../assets/DejaVuSans-subset.ttf");
static REGISTER: Once = Once::new();

/// Makes [`FONT`] available to plotters (once per process).
pub fn register() {
    REGISTER.call_once(|| {
        // The font is compiled in and known to parse; a failure would be a build error.
        let _ = register_font(FONT, FontStyle::Normal, FONT_DATA);
    });
}

/// Width and height in pixels of `text` at `size` points, as it will be drawn.
pub fn text_size(text: &str, size: f64) -> (u32, u32) {
    register();
    let font = FontDesc::new(FontFamily::Name(FONT), size, FontStyle::Normal);
    font.box_size(text)
        .unwrap_or((text.len() as u32 * size as u32 * 6 / 10, size as u32))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    /// The format an output file's extension asks for.
    pub fn of(out: &Path) -> TraceResult<Format> {
        match out
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
        {
            Some(e) if e == "svg" => Ok(Format::Svg),
            Some(e) if e == "png" => Ok(Format::Png),
            _ => Err(TraceError::invalid(
                out,
                "output must be an .svg or a .png file",
            )),
        }
    }
}

pub type DrawResult = Result<(), Box<dyn Error>>;

/// Something that draws on any plotters backend.
pub trait Figure {
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static;
}

/// Draws `figure` into `out`, as the extension says.
pub fn render(figure: &impl Figure, out: &Path) -> TraceResult<()> {
    let format = Format::of(out)?;
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.is_dir() {
            return Err(TraceError::invalid(out, "output directory does not exist"));
        }
    }
    register();
    let failed = |e: Box<dyn Error>| TraceError::invalid(out, format!("cannot draw plot: {e}"));
    let (w, h) = figure.size();
    match format {
        Format::Svg => {
            let svg = draw_svg(figure).map_err(failed)?;
            std::fs::write(out, svg).map_err(|e| TraceError::io(out, e))
        }
        Format::Png => {
            let mut rgb = vec![0u8; w as usize * h as usize * 3];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
                figure.draw(&root).map_err(failed)?;
                root.present().map_err(|e| failed(e.into()))?;
            }
            write_png(out, w, h, &rgb)
        }
    }
}

/// Draws `figure` into an SVG document held in memory, to be written out
/// or inlined in a page ([`crate::page`]). Its one URL is the `xmlns`
/// attribute, [`SVG_NAMESPACE`], which names the format and is never fetched.
pub fn svg_string(figure: &impl Figure) -> TraceResult<String> {
    register();
    draw_svg(figure)
        .map_err(|e| TraceError::invalid("(SVG in memory)", format!("cannot draw plot: {e}")))
}

/// The namespace every SVG names in its `xmlns` attribute.
pub const SVG_NAMESPACE: &str = "http://www.w3.org/2000/svg";

fn draw_svg(figure: &impl Figure) -> Result<String, Box<dyn Error>> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, figure.size()).into_drawing_area();
        figure.draw(&root)?;
        root.present()?;
    }
    Ok(svg)
}

fn write_png(out: &Path, w: u32, h: u32, rgb: &[u8]) -> TraceResult<()> {
    let file = std::fs::File::create(out).map_err(|e| TraceError::io(out, e))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let bad = |e: png::EncodingError| TraceError::invalid(out, format!("cannot write PNG: {e}"));
    let mut writer = enc.write_header().map_err(bad)?;
    writer.write_image_data(rgb).map_err(bad)?;
    writer.finish().map_err(bad)
}
