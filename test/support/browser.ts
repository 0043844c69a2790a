/**
 * Debian's Chromium for the browser tests, driven by playwright-core (which downloads no
 * browser). Without /usr/bin/chromium the browser suites are skipped, unless
 * FORMWORK_TEST_REQUIRE_BROWSER is set (as .ci/run does), in which case they fail.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContextOptions, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

const REQUIRE_BROWSER = Boolean(process.env.FORMWORK_TEST_REQUIRE_BROWSER);

/** The `skip` option of a browser suite: a reason when Chromium is missing and not required. */
export const skipBrowser: string | false =
  !existsSync(CHROMIUM) && !REQUIRE_BROWSER
    ? `${CHROMIUM} is not installed (apt-get install chromium; set FORMWORK_TEST_REQUIRE_BROWSER=1 to fail instead of skipping)`
    : false;

/**
 * How long a browser wait lasts before it gives up: a guard against a page that never comes,
 * not a claim about speed (timing belongs in the benchmarks). CI runs three suites side by side
 * on two cores, and Chromium's share of them swings: in one passing run the API page's test took
 * 45 s in all; in a failing one (2026-12-02) its Swagger UI had not shown its title after 60 s.
 */
export const BROWSER_WAIT_MS = 180_000;

/**
 * A browser suite's time budget: room for several waits that each may run long under load. The
 * hosted page's eight tests took 83 s in a passing CI run and more than 300 s (this budget, then)
 * in the failing one above, on the same kind of machine.
 */
export const BROWSER_SUITE_MS = 900_000;

async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `FORMWORK_TEST_REQUIRE_BROWSER is set but ${CHROMIUM} is missing: install Debian's chromium package`,
    );
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

/**
 * Starts an app and Chromium at once. When either fails, the one that started is closed
 * before the failure is thrown, so a suite's after() has nothing half-started to clean up.
 */
export async function startWithBrowser<T extends { close(): Promise<void> }>(
  starting: Promise<T>,
): Promise<{ app: T; browser: Browser }> {
  const [started, launched] = await Promise.allSettled([starting, launchChromium()]);
  if (started.status === 'fulfilled' && launched.status === 'fulfilled')
    return { app: started.value, browser: launched.value };
  if (started.status === 'fulfilled') await started.value.close();
  if (launched.status === 'fulfilled') await launched.value.close();
  throw started.status === 'rejected' ? started.reason : (launched as PromiseRejectedResult).reason;
}

/** A page in a context of its own, whose waits and navigations give up after BROWSER_WAIT_MS. */
export async function newBrowserPage(browser: Browser, options: BrowserContextOptions = {}): Promise<Page> {
  const context = await browser.newContext(options);
  context.setDefaultTimeout(BROWSER_WAIT_MS);
  context.setDefaultNavigationTimeout(BROWSER_WAIT_MS);
  return context.newPage();
}
