/**
 * The spec's reply rule: success only for a 2xx whose body is exactly `success` or `ok` (any case, nothing
 * around it, not even a newline) or the JSON `{"code":200}`. Everything else is a failure that triggers a retry.
 */
export function isSuccessReply(status: number, body: string): boolean {
  if (status < 200 || status > 299) return false;
  if (/^(success|ok)$/i.test(body)) return true;
  return isCode200Json(body);
}

/**
 * `{"code":200}` as JSON: whitespace inside the object is JSON's business, so `{ "code": 200 }` counts too, but
 * the code must be the number 200 and the only field; a string "200" or extra fields do not count.
 */
function isCode200Json(body: string): boolean {
  if (body !== body.trim() || !body.startsWith('{')) return false;
  try {
    const parsed: unknown = JSON.parse(body);
    return (
      typeof parsed === 'object' &&
      parsed !== null &&
      !Array.isArray(parsed) &&
      Object.keys(parsed).length === 1 &&
      (parsed as { code?: unknown }).code === 200
    );
  } catch {
    return false;
  }
}
