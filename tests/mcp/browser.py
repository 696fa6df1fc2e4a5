"""A headless stand-in for a web browser in the OAuth tests: `$BROWSER` runs it with the
authorization URL; it follows the redirect chain with a cookie jar (the provider completes
login and consent by itself) all the way to the gateway's loopback callback, and appends
the callback URL it reached to $BROWSER_LOG."""
import http.cookiejar
import os
import sys
import urllib.request

url = sys.argv[1]
reached = []


class Recorder(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        reached.append(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), Recorder)
opener.open(url, timeout=30).read()
with open(os.environ["BROWSER_LOG"], "a") as log:
    log.write([u for u in reached if "/callback?" in u][-1] + "\n")
