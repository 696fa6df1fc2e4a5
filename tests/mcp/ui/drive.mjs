// Drives the gateway's web UI in real headless Chromium (Debian's /usr/bin/chromium) for
// tests/mcp/test_ui.py. Usage: node drive.mjs <flow> <ui base URL> <screenshot dir> [args…]
// Prints one JSON object with what the flow saw; exits 1 with the error otherwise.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";

const [flow, base, shots, ...args] = process.argv.slice(2);
mkdirSync(shots, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
const problems = [];
page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
page.on("pageerror", (e) => problems.push(String(e)));

const shot = async (name) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
const flash = async () => (await page.locator(".flash").first().textContent({ timeout: 5000 })).trim();
const rows = async (selector) => page.locator(`${selector} tbody tr`).count();

const flows = {
  // Every page, screenshotted; what each shows.
  async pages() {
    const seen = {};
    for (const [name, path] of JSON.parse(args[0])) {
      const response = await page.goto(base + path);
      seen[name] = { status: response.status(), h1: (await page.locator("h1").textContent()).trim(),
        text: await page.locator("main").innerText() };
      await shot(name);
    }
    return seen;
  },
  // Waits for a pending call and answers it with the button named args[0].
  async approve() {
    const label = args[0];
    for (let i = 0; i < 100; i++) {
      await page.goto(base + "/consent");
      if (await page.locator("table.pending tbody tr").count() > 0) break;
      await page.waitForTimeout(200);
    }
    await shot("consent-pending");
    const row = page.locator("table.pending tbody tr").first();
    const state = (await row.locator("td").nth(4).innerText()).trim();
    await row.getByRole("button", { name: label, exact: true }).click();
    await page.waitForURL(/flash=/);
    await shot("consent-answered");
    return { state, flash: await flash(), left: await rows("table.pending") };
  },
  // Stores an API key for app args[0] through the form.
  async apikey() {
    const [app, key] = args;
    await page.goto(base + "/credentials");
    const section = page.locator("section.credential", { has: page.locator(`code:text-is("${app}")`) });
    const before = (await section.locator(".stored").innerText()).trim();
    await section.getByLabel("API key").fill(key);
    await section.getByRole("button", { name: "Save" }).click();
    await page.waitForURL(/flash=/);
    await shot("credentials-saved");
    const after = (await page.locator("section.credential", { has: page.locator(`code:text-is("${app}")`) })
      .locator(".stored").innerText()).trim();
    return { before, after, flash: await flash(), html: await page.content() };
  },
  // Filters the history by app args[0].
  async filter() {
    await page.goto(base + "/history");
    const before = await rows("table.calls");
    await page.getByLabel("App").fill(args[0]);
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL(/app=/);
    await shot("history-filtered");
    const apps = await page.locator("table.calls tbody tr td:nth-child(3)").allInnerTexts();
    await page.locator("table.calls tbody tr a").first().click();
    await page.waitForURL(/\/history\/\d+/);
    await shot("history-detail");
    return { before, after: apps.length, apps, detail: await page.locator("main").innerText() };
  },
  // Submits the grant form with its CSRF field removed.
  async csrf() {
    await page.goto(base + "/consent");
    await page.locator("#grant input[name=csrf]").evaluate((e) => e.remove());
    await page.locator("#grant input[name=caller]").fill("forged@http");
    await page.locator("#grant input[name=app]").fill(args[0]);
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith("/consent/grant")),
      page.locator("#grant button[type=submit]").click(),
    ]);
    await shot("csrf-refused");
    return { status: response.status(), text: await page.locator("body").innerText() };
  },
  // Revokes the grant of caller args[0].
  async revoke() {
    await page.goto(base + "/consent");
    const row = page.locator("table.grants tbody tr", { hasText: args[0] });
    await row.getByRole("button", { name: "Revoke" }).click();
    await page.waitForURL(/flash=/);
    await shot("consent-revoked");
    return { flash: await flash(), grants: await rows("table.grants") };
  },
};

try {
  const result = await flows[flow]();
  console.log(JSON.stringify({ ...result, problems }));
} catch (e) {
  console.error(String(e && e.stack || e));
  process.exitCode = 1;
} finally {
  await browser.close();
}
