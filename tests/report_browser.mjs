// Opens a clustersim report from disk in Debian's headless Chromium (playwright-core drives it) and
// checks what a reader would see: no console errors or uncaught exceptions, every chart drawn (a
// non-empty SVG in each chart's element), and a screenshot that is not blank.
//
//   node tests/report_browser.mjs REPORT.html SCREENSHOT.png
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import path from "node:path";
import fs from "node:fs";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "reports", "web", "package.json"));
const { chromium } = require("playwright-core");

const [report, screenshotPath] = process.argv.slice(2);
if (!report || !screenshotPath) {
  console.error("usage: node report_browser.mjs REPORT.html SCREENSHOT.png");
  process.exit(2);
}
const executable = process.env.CHROMIUM || "/usr/bin/chromium";
const problems = [];
const browser = await chromium.launch({
  executablePath: executable,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`uncaught exception: ${e.message}`));
  page.on("dialog", (d) => {
    problems.push(`the page opened a dialog (script from the results ran): ${d.message()}`);
    d.dismiss();
  });
  page.on("request", (r) => {
    if (!r.url().startsWith("file:") && !r.url().startsWith("data:")) problems.push(`the page fetched ${r.url()} (a report must work offline)`);
  });
  await page.goto(pathToFileURL(path.resolve(report)).href, { waitUntil: "load" });
  const result = await page.evaluate(() => {
    const charts = [...document.querySelectorAll("div.chart")];
    return {
      drawn: Number(document.body.dataset.chartsDrawn || 0),
      charts: charts.map((c) => {
        const svg = c.querySelector("svg");
        return { id: c.id, shapes: svg ? svg.querySelectorAll("path, rect, circle, text, line, polyline").length : 0, width: svg ? svg.getBoundingClientRect().width : 0 };
      }),
    };
  });
  if (result.charts.length === 0) problems.push("the page has no charts");
  if (result.drawn !== result.charts.length) problems.push(`report.js drew ${result.drawn} of ${result.charts.length} charts`);
  for (const c of result.charts) {
    if (c.shapes < 10 || c.width < 100) problems.push(`chart ${c.id} is empty (${c.shapes} SVG shapes, ${c.width}px wide)`);
  }
  const png = await page.screenshot({ fullPage: true });
  fs.writeFileSync(screenshotPath, png);
  // Not blank: decode the screenshot in the page and count distinct colours on a sample grid.
  const colours = await page.evaluate(async (b64) => {
    const img = new Image();
    img.src = "data:image/png;base64," + b64;
    await img.decode();
    const canvas = document.createElement("canvas");
    canvas.width = img.width;
    canvas.height = img.height;
    const g = canvas.getContext("2d");
    g.drawImage(img, 0, 0);
    const seen = new Set();
    const data = g.getImageData(0, 0, img.width, img.height).data;
    for (let i = 0; i < data.length; i += 4 * 97) seen.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
    return { distinct: seen.size, width: img.width, height: img.height };
  }, png.toString("base64"));
  if (colours.distinct < 20) problems.push(`the screenshot looks blank (${colours.distinct} distinct colours)`);
  console.log(`${result.charts.length} charts drawn; screenshot ${colours.width}x${colours.height} px with ${colours.distinct} distinct colours (sampled)`);
} finally {
  await browser.close();
}
if (problems.length) {
  for (const p of problems) console.error(p);
  process.exit(1);
}
