/** Debian's chromium for the console's browser tests, and where their screenshots go. */
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Screenshots of the browser tests (git-ignored), made on first use. */
export const ARTIFACTS = path.resolve(import.meta.dirname, '../../../test-results');

/**
 * Start chromium headless. No silent skip: CI installs Debian's chromium (.ci/run); without it the test says what to
 * do. The caller closes it.
 */
export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`chromium not found at ${CHROMIUM}: install it (apt-get install chromium) or set CHROMIUM_PATH`);
  mkdirSync(ARTIFACTS, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}

/**
 * Wait until the field named `name` has the focus (an `autofocus` field gets it only after the load event): keys
 * typed before that are lost, as a busy CI machine showed.
 */
export async function waitForFocus(page: Page, name: string): Promise<void> {
  // A string, evaluated in the page: this project's TypeScript has no DOM types.
  await page.waitForFunction(`document.activeElement?.getAttribute('name') === ${JSON.stringify(name)}`, undefined, {
    timeout: 10_000,
  });
}
