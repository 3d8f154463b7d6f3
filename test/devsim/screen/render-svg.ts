import type { Display } from "./display.js";
import { walk, type UiNode } from "./ui-node.js";

const escape = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/** A stable colour per label, so launcher icons differ. */
function hue(text: string): number {
  let sum = 0;
  for (const char of text) sum = (sum * 31 + char.charCodeAt(0)) >>> 0;
  return sum % 360;
}

/**
 * Draws the UI tree as SVG: shapes carry the meaning (bars, buttons, a
 * filled box for a checked checkbox, a switch thumb's side), so screenshots
 * differ visibly whenever the tree does, even where no fonts are installed.
 */
export function renderSvg(root: UiNode, display: Display, clock: string): string {
  const { width, height } = display.logicalSize;
  const dp = (value: number) => display.dp(value);
  const out: string[] = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`];
  out.push(`<rect width="${width}" height="${height}" fill="${root.color ?? "#fafafa"}"/>`);
  const text = (x: number, y: number, value: string, size: number, fill = "#202124") => value ? out.push(`<text x="${x}" y="${y}" font-family="sans-serif" font-size="${size}" fill="${fill}">${escape(value)}</text>`) : 0;

  for (const node of walk(root)) {
    if (node === root) continue;
    const { left, top, right, bottom } = node.bounds;
    const w = right - left;
    const h = bottom - top;
    const mid = top + h / 2;
    const accent = node.enabled ? (node.color ?? "#1a73e8") : "#bdbdbd";
    switch (node.className) {
      case "android.view.ViewGroup":
        if (node.color) out.push(`<rect x="${left}" y="${top}" width="${w}" height="${h}" fill="${node.color}"/>`);
        break;
      case "android.widget.Button":
        out.push(`<rect x="${left}" y="${top}" width="${w}" height="${h}" rx="${dp(20)}" fill="${accent}"/>`);
        text(left + dp(24), mid + dp(6), node.text, dp(16), "#ffffff");
        break;
      case "android.widget.CheckBox": {
        const box = dp(24);
        out.push(`<rect x="${left + dp(4)}" y="${mid - box / 2}" width="${box}" height="${box}" rx="${dp(3)}" fill="${node.checked ? accent : "none"}" stroke="${accent}" stroke-width="${dp(2)}"/>`);
        if (node.checked) out.push(`<path d="M${left + dp(9)} ${mid} l${dp(5)} ${dp(5)} l${dp(10)} -${dp(10)}" stroke="#ffffff" stroke-width="${dp(3)}" fill="none"/>`);
        text(left + dp(40), mid + dp(6), node.text, dp(16));
        break;
      }
      case "android.widget.Switch": {
        const trackW = dp(36);
        const x = right - trackW - dp(8);
        out.push(`<rect x="${x}" y="${mid - dp(7)}" width="${trackW}" height="${dp(14)}" rx="${dp(7)}" fill="${node.checked ? accent : "#9e9e9e"}"/>`);
        out.push(`<circle cx="${node.checked ? x + trackW - dp(10) : x + dp(10)}" cy="${mid}" r="${dp(10)}" fill="${node.checked ? accent : "#f1f1f1"}" stroke="#757575" stroke-width="1"/>`);
        text(left, mid + dp(6), node.text, dp(16), node.enabled ? "#202124" : "#9e9e9e");
        break;
      }
      case "android.widget.EditText":
        out.push(`<rect x="${left}" y="${bottom - dp(node.focused ? 3 : 1)}" width="${w}" height="${dp(node.focused ? 3 : 1)}" fill="${node.focused ? accent : "#757575"}"/>`);
        text(left + dp(4), mid + dp(6), node.text, dp(16), "#202124");
        break;
      case "android.widget.LinearLayout":
        if (node.clickable) {
          out.push(`<circle cx="${left + dp(20)}" cy="${mid}" r="${dp(12)}" fill="#607d8b"/>`);
          out.push(`<rect x="${left}" y="${bottom - 1}" width="${w}" height="1" fill="#e0e0e0"/>`);
        }
        break;
      case "android.widget.TextView":
        if (node.clickable && node.contentDesc) {
          // A launcher icon: a coloured disc with the label under it.
          out.push(`<circle cx="${left + w / 2}" cy="${top + dp(30)}" r="${dp(26)}" fill="hsl(${hue(node.contentDesc)},60%,55%)"/>`);
          text(left + dp(4), bottom - dp(8), node.text, dp(12), "#ffffff");
        } else {
          const big = node.resourceId.endsWith(":id/clock_view");
          text(node.bounds.left, mid + dp(big ? 24 : 6), node.text, dp(big ? 64 : 18), root.color === "#fafafa" ? "#202124" : "#ffffff");
        }
        break;
    }
  }
  // Status bar on top of the window.
  out.push(`<rect width="${width}" height="${dp(24)}" fill="#000000" fill-opacity="0.85"/>`);
  text(dp(16), dp(17), clock, dp(13), "#ffffff");
  out.push(`<rect x="${width - dp(40)}" y="${dp(7)}" width="${dp(22)}" height="${dp(11)}" rx="${dp(2)}" fill="#ffffff"/>`);
  out.push("</svg>");
  return out.join("");
}
