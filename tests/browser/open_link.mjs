// Opens one link in headless Chromium as a user would click it and prints the text of
// one element once the page shows it (exit 1, with the page's text, when it does not):
//
//   node tests/browser/open_link.mjs URL SELECTOR
//
// tests/integration/test_dashboard.py opens the sign-in link `ag start-head` prints.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const [url, selector] = process.argv.slice(2);
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const profile = mkdtempSync(join(tmpdir(), "ag-link-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: CHROMIUM,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
  timeout: 30000,
});
let code = 0;
try {
  const page = context.pages()[0] || await context.newPage();
  await page.goto(url, { timeout: 20000 });
  try {
    await page.locator(selector).first().waitFor({ timeout: 20000 });
    console.log(JSON.stringify({ url: page.url(), text: (await page.locator(selector).first().textContent()).trim() }));
  } catch (error) {
    console.error(`${selector} did not show at ${page.url()}: ${error.message}\n${await page.locator("body").innerText()}`);
    code = 1;
  }
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(code);
