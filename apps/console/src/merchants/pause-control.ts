/**
 * THE SPOT FOR THE PAUSE / RESUME FORM of a merchant's page (issue 51, the `pause` part: merchants/pause.ts). The page
 * already shows the paused state (who, why, since); this renders the control, asking `can(viewer.role, ...)` before it
 * draws a form. Until pause and resume exist it renders nothing.
 */
import type { Operator } from '../operators/operator.ts';
import type { Html } from '../web/html.ts';
import type { MerchantFigures } from './queries.ts';

export function pauseControl(_merchant: MerchantFigures, _viewer: Operator): Html | '' {
  return '';
}
